"""letta-evals extractors as streaming state machines.

Each extractor of ``letta_evals/extractors/builtin.py`` is rewritten to read
the trajectory one event at a time into a :class:`Slot` (plain data, part of
the checkpointed grader state) and to give, at any moment, the value the
upstream function would return on the trajectory seen so far:

* ``last_assistant`` / ``after_marker`` / ``pattern`` keep only the value
  from the latest assistant message that qualifies (scanning last to first,
  as upstream does, is the same as letting each qualifying message replace
  the value). ``pattern`` also remembers a regex timeout on the latest
  message that had one: upstream would have reached that message first, so
  it becomes an ``error`` verdict only if no later message matched.
* ``first_assistant`` / ``tool_arguments`` / ``tool_output`` stop at their
  first find and set ``done``: the value can no longer change.
* ``all_assistant`` and ``last_turn`` must keep the texts they will join;
  memory is the size of the submission they produce (upstream builds the
  same string), ``last_turn`` only the current turn's.
* ``memory_block`` reads the agent state when the trace ends.
* custom extractors receive the whole trajectory, rebuilt as Letta message
  dicts (attribute access works too: ``msg.content``); keeping it is
  unavoidable, since user code may read any of it.

Options are checked and compiled in ``_compile``.
"""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any, Final

import msgspec

from trajgrade.errors import GradeError
from trajgrade.graders.letta._functions import run_timed

if TYPE_CHECKING:
    from collections.abc import Callable

    import regex

    from trajgrade.events import Message, ToolCall, ToolResult

__all__ = (
    "EXTRACT_MAX",
    "AfterMarker",
    "Custom",
    "Extractor",
    "First",
    "Joined",
    "Last",
    "MemoryBlock",
    "PatternFind",
    "Record",
    "Slot",
    "ToolArguments",
    "ToolOutput",
    "raw_arguments",
    "result_text",
)


class Slot(msgspec.Struct, array_like=True, gc=False):
    """Extraction progress over one scope: the trace, or one turn (per-turn)."""

    #: Any Letta message (text, tool call, tool return) seen in the scope.
    content: bool = False
    #: The value can no longer change.
    done: bool = False
    text: str | None = None
    #: Lists are made on first use (most slots never need one).
    parts: list[str] | None = None
    call_id: str | None = None
    #: A regex timeout that decides the value unless a later match replaces it.
    error: str | None = None
    #: Custom extractors only: the trajectory as Letta message dicts.
    turns: list[list[dict[str, Any]]] | None = None
    #: Characters ``parts``/``turns`` hold (bounded by EXTRACT_MAX).
    size: int = 0


#: How many characters an extractor that keeps a whole trace (``all_assistant``
#: and the like, custom extractors) collects at most; past it the value is an
#: ``error`` instead of the whole text, and per-trace state stays bounded.
EXTRACT_MAX: Final = 8 * 2**20
#: What one custom record costs beside its texts (its keys), in characters.
_RECORD_COST: Final = 64


def _grow(slot: Slot, chars: int) -> bool:
    """Count ``chars`` more into ``slot``; False (and the slot's collection
    dropped, with an error) once it passes EXTRACT_MAX, and from then on."""
    if slot.error is not None:
        return False
    slot.size += chars
    if slot.size <= EXTRACT_MAX:
        return True
    slot.parts = slot.turns = None
    slot.error = (
        f"the extractor collected more than {EXTRACT_MAX:,} characters of this "
        "trace, which trajgrade does not keep per trace; an extractor that keeps "
        "less (last_assistant, a pattern, tool_arguments) avoids it"
    )
    return False


class Extractor:
    """A compiled extractor; the hooks update a Slot in place (no other state)."""

    def assistant(self, slot: Slot, text: str) -> None:
        """An assistant message's flattened text."""

    def message(self, slot: Slot, msg: Message) -> None:
        if msg.role == "assistant":
            self.assistant(slot, msg.text)

    def call(self, slot: Slot, call: ToolCall) -> None:
        """A tool call."""

    def result(self, slot: Slot, result: ToolResult) -> None:
        """A tool return."""

    def turn(self, slot: Slot) -> None:
        """A new turn begins in the same scope."""

    def value(self, slot: Slot, agent_state: Any) -> str:
        """The extracted submission; GradeError when it cannot be had."""
        return slot.text or ""

    def reads_call(self, name: str) -> bool:
        """Whether :meth:`call` can change a slot for a call named ``name``."""
        return type(self).call is not Extractor.call

    def reads_messages(self) -> bool:
        """Whether :meth:`message` can change a slot."""
        cls = type(self)
        return cls.message is not Extractor.message or (
            cls.assistant is not Extractor.assistant
        )


class Last(Extractor):
    def assistant(self, slot: Slot, text: str) -> None:
        slot.text = text


class First(Extractor):
    def assistant(self, slot: Slot, text: str) -> None:
        if not slot.done:
            slot.text, slot.done = text, True


class Joined(Extractor):
    def __init__(self, separator: str, *, last_turn_only: bool) -> None:
        self.separator = separator
        self.last_turn_only = last_turn_only

    def assistant(self, slot: Slot, text: str) -> None:
        if not _grow(slot, len(text)):
            return
        if slot.parts is None:
            slot.parts = [text]
        else:
            slot.parts.append(text)

    def turn(self, slot: Slot) -> None:
        if self.last_turn_only:
            slot.parts, slot.size, slot.error = None, 0, None

    def value(self, slot: Slot, agent_state: Any) -> str:
        if slot.error is not None:
            raise GradeError(slot.error)
        return self.separator.join(slot.parts or ())


class PatternFind(Extractor):
    def __init__(
        self,
        source: str,
        compiled: regex.Pattern[str],
        group: Any,
        search_all: bool,
        timeout: float,
    ) -> None:
        self.source, self.compiled = source, compiled
        self.group, self.search_all = group, search_all
        self.timeout = timeout

    def assistant(self, slot: Slot, text: str) -> None:
        try:
            found = self._find(text)
        except GradeError as exc:
            slot.text, slot.error = None, exc.message
            return
        if found is not None:
            slot.text, slot.error = found, None

    def _find(self, text: str) -> str | None:
        from trajgrade.graders.letta._regex import findall  # loads regex

        method = (
            functools.partial(findall, self.compiled)
            if self.search_all
            else self.compiled.search
        )
        out = run_timed(
            method,
            text,
            source=self.source,
            where="extractor_config.pattern",
            timeout=self.timeout,
        )
        if not out:  # no match (None, or findall's [])
            return None
        if not self.search_all:
            # An optional group that did not take part is None upstream, which
            # then counts as an empty submission: "" says the same.
            return out.group(self.group) or ""
        if isinstance(out[0], tuple):
            # findall yields tuples when there are 2+ groups; `group` then
            # indexes the tuple 0-based (upstream quirk, kept).
            return " ".join(m[self.group] for m in out)
        return " ".join(out)

    def value(self, slot: Slot, agent_state: Any) -> str:
        if slot.error is not None:
            raise GradeError(slot.error)
        return slot.text or ""


class ToolArguments(Extractor):
    def __init__(self, tool_name: str) -> None:
        self.tool_name = tool_name

    def reads_call(self, name: str) -> bool:
        return name == self.tool_name

    def call(self, slot: Slot, call: ToolCall) -> None:
        if not slot.done and call.name == self.tool_name:
            slot.text, slot.done = raw_arguments(call), True

    def value(self, slot: Slot, agent_state: Any) -> str:
        # "{}" when no call matched: non-empty, so the function still runs.
        return slot.text if slot.done and slot.text is not None else "{}"


class ToolOutput(Extractor):
    def __init__(self, tool_name: str) -> None:
        self.tool_name = tool_name

    def reads_call(self, name: str) -> bool:
        return name == self.tool_name

    def call(self, slot: Slot, call: ToolCall) -> None:
        # Upstream skips a matching call without an id and looks further.
        if slot.call_id is None and call.name == self.tool_name and call.call_id:
            slot.call_id = call.call_id

    def result(self, slot: Slot, result: ToolResult) -> None:
        if not slot.done and slot.call_id and result.call_id == slot.call_id:
            slot.text, slot.done = result_text(result.result), True


class AfterMarker(Extractor):
    def __init__(self, marker: str, include: bool) -> None:
        self.marker, self.include = marker, include

    def assistant(self, slot: Slot, text: str) -> None:
        idx = text.find(self.marker)
        if idx >= 0:
            start = idx if self.include else idx + len(self.marker)
            slot.text = text[start:].strip()


class MemoryBlock(Extractor):
    def __init__(self, label: str) -> None:
        self.label = label

    def value(self, slot: Slot, agent_state: Any) -> str:
        if agent_state is None:
            msg = "memory_block extractor requires agent_state, but it was not retrieved; give the sample an agent_state ({blocks: [{label, value}]})"
            raise GradeError(msg)
        blocks = agent_state.get("blocks") if isinstance(agent_state, dict) else None
        for block in blocks if isinstance(blocks, list) else ():
            if isinstance(block, dict) and block.get("label") == self.label:
                value = block.get("value")
                if not isinstance(value, str):
                    msg = f"agent_state block {self.label!r} has a {type(value).__name__} value; block values are strings"
                    raise GradeError(msg)
                return value
        return ""


class Custom(Extractor):
    """A user extractor: gets the trajectory as Letta message dicts."""

    def __init__(self, func: Callable[..., Any], label: str, config: Any) -> None:
        self.func, self.label, self.config = func, label, config
        self.with_state = getattr(func, "_extractor_param_count", 2) == 3

    def _append(self, slot: Slot, record: dict[str, Any], chars: int) -> None:
        if not _grow(slot, chars + _RECORD_COST):
            return
        if not slot.turns:
            slot.turns = [[]]
        slot.turns[-1].append(record)

    def message(self, slot: Slot, msg: Message) -> None:
        key = "reasoning" if msg.role == "reasoning" else "content"
        record = {"message_type": f"{msg.role}_message", key: msg.text}
        self._append(slot, record, len(msg.text))

    def call(self, slot: Slot, call: ToolCall) -> None:
        arguments = raw_arguments(call)
        one = {"name": call.name, "arguments": arguments, "tool_call_id": call.call_id}
        record = {
            "message_type": "tool_call_message",
            "tool_call": one,
            "tool_calls": [one],
        }
        self._append(slot, record, len(call.name) + len(arguments))

    def result(self, slot: Slot, result: ToolResult) -> None:
        text = result_text(result.result)
        record = {
            "message_type": "tool_return_message",
            "tool_call_id": result.call_id,
            "tool_return": text,
            "status": "error" if result.is_error else "success",
        }
        self._append(slot, record, len(text))

    def turn(self, slot: Slot) -> None:
        if not _grow(slot, _RECORD_COST):
            return
        if not slot.turns:
            slot.turns = [[]]
        slot.turns.append([])

    def value(self, slot: Slot, agent_state: Any) -> str:
        if slot.error is not None:
            raise GradeError(slot.error)
        trajectory = [[_view(m) for m in turn] for turn in slot.turns or ()]
        config = dict(self.config or {})
        try:
            if self.with_state:
                out = self.func(trajectory, config, _view(agent_state))
            else:
                out = self.func(trajectory, config)
        except GradeError:
            raise
        except Exception as exc:
            msg = f"extractor {self.label} raised {type(exc).__name__}: {exc}"
            raise GradeError(msg) from exc
        if not isinstance(out, str):
            msg = f"extractor {self.label} returned {type(out).__name__}; extractors return str"
            raise GradeError(msg)
        return out


class Record(dict[str, Any]):
    """A Letta message (or agent state) dict whose keys read as attributes too."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _view(value: Any) -> Any:
    """A deep copy as Records: user code may not alter the grader's state."""
    if isinstance(value, dict):
        return Record({k: _view(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_view(v) for v in value]
    return value


def raw_arguments(call: ToolCall) -> str:
    """The call's arguments as the producer wrote them (Letta: a JSON string)."""
    if call.args_raw is not None:
        return call.args_raw
    # Formats that carry an object: Python's json.dumps, as Letta writes them.
    return "" if call.args is None else json.dumps(call.args)


def result_text(result: Any) -> str:
    """A tool result as text (Letta's tool_return is already a string)."""
    if isinstance(result, str):
        return result
    return "" if result is None else json.dumps(result)
