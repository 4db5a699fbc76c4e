"""SWE-agent ``.traj`` files (0.x and 1.x): one JSON document per run.

A ``.traj`` is ``{environment, trajectory[], history[], info,
replay_config?}``. The reader builds ``history`` messages one at a time (what
the model saw and said, in order) and then ``info``; ``trajectory`` (the same
steps again, with observations) is parsed past without being built, so memory
stays flat and nothing is counted twice.

Mapping (``history[]`` by ``role``):

* ``system`` → ``message`` (role ``system``).
* ``user``: the first one that is not a demonstration (``is_demo``) is the
  task → ``turn_start`` (source ``user``) + ``message``; a later one is the
  observation of the open action (0.x) → ``tool_result`` (the action's
  name), else a ``message`` (role ``user``; format-error feedback and the
  like). Demonstrations are skipped.
* ``assistant`` → ``message`` (its ``content``, when not empty), then the
  call: 1.x ``tool_calls[{id, function{name, arguments}}]`` → one
  ``tool_call`` each (the JSON-string ``arguments`` parsed once into
  ``args``, kept in ``args_raw``); otherwise (0.x, and 1.x without function
  calling) a non-empty ``action`` → one ``tool_call`` named by the action's
  first word (the SWE-agent command: ``edit``, ``open``, ``submit``, or the
  shell program), ``args`` ``{"command": <action as written>}``, no id.
* ``tool`` (1.x) → one ``tool_result`` per id in ``tool_call_ids`` (a list;
  a single ``tool_call_id`` is read too), ``content`` as written, named
  after its call.
* ``info`` → ``usage`` (``model_stats``: ``tokens_sent`` → input,
  ``tokens_received`` → output, ``instance_cost`` → ``cost_usd``) and
  ``trace_end`` (``result`` = ``submission``).

Decisions:

1. Pairing: by id in 1.x (``tool_calls[].id`` ↔ ``tool_call_ids[]``); 0.x
   has no ids, so an action's result is the next ``user`` message
   (adjacency), and both carry no ``call_id``. The last action (0.x
   ``submit``) has no observation in ``history``; its observation in
   ``trajectory`` is the submission, so when ``info.submission`` is there
   it is that action's result (else the action stays unanswered). 1.x
   writes no ``history`` entry for its final ``submit`` (it is only in
   ``trajectory``), so that call is not seen; ``trace_end`` carries the
   submission.
2. Turns: SWE-agent runs are not interactive: one turn, opened by the task.
3. Errors: observations have no error flag (``is_error`` unset); the run
   failed when ``info.exit_status`` does not start with ``submitted``
   (``exit_cost``, ``exit_format``, ``exit_error``, …): ``trace_end``
   ``is_error``.
4. Usage: the file has run totals only; they are one ``usage`` event at the
   end, so a token budget is decided when the document ends.
5. No timestamps exist; the trace is the source's default trace (the
   document names no run id before its events).
6. The document is a finished run: ``trace_end`` at its end, also when
   ``info`` is missing or the document is cut (which is reported).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from trajgrade.events import (
    Message,
    ToolCall,
    ToolResult,
    TraceEnd,
    TurnStart,
    Usage,
)
from trajgrade.formats._fields import finite
from trajgrade.formats._message_items import MessageItemsReader
from trajgrade.formats._openai_chat_messages import (
    BadMessageError,
    text_of,
    tool_call,
)

if TYPE_CHECKING:
    from trajgrade.errors import InputError
    from trajgrade.events import Event
    from trajgrade.formats._document import DocShape

__all__ = ("FORMAT", "FORMATS", "SweAgentReader")


class SweAgentReader(MessageItemsReader):
    """Translates a ``.traj`` document into canonical events."""

    format = "swe-agent"
    ITEMS = ("history.item", "info")

    def __init__(self, *, source: str, default_trace: str) -> None:
        super().__init__(source=source, default_trace=default_trace)
        self._tasked = False
        #: The name of the 0.x action waiting for its observation.
        self._open: str | None = None
        #: Names of the 1.x calls waiting for their results, by id.
        self._names: dict[str, str] = {}

    def _message(self, m: Any) -> list[Event]:
        if not isinstance(m, dict):
            msg = f"a history entry must be an object, got {type(m).__name__}"
            raise BadMessageError(msg)
        role = m.get("role")
        if role == "tool":
            return self._results(m)
        if not isinstance(role, str):
            msg = "a history entry needs a string `role`"
            raise BadMessageError(msg, "role")
        if m.get("is_demo"):
            return []
        text = text_of(m.get("content"))
        if role == "user":
            return self._user(m, text)
        if role != "assistant":
            return [Message(trace_id=self.trace_id, role=role, text=text)]
        return self._assistant(m, text)

    def _results(self, m: dict[str, Any]) -> list[Event]:
        """A 1.x ``tool`` entry: one result per call id, named after its call."""
        ids = m.get("tool_call_ids")
        if ids is None:
            ids = [m.get("tool_call_id")]
        if not isinstance(ids, list):
            msg = "`tool_call_ids` must be a list of call ids"
            raise BadMessageError(msg, "tool_call_ids")
        tid = self.trace_id
        result = m.get("content")
        return [
            ToolResult(
                trace_id=tid,
                call_id=cid if isinstance(cid, str) else None,
                name=self._names.pop(cid, None) if isinstance(cid, str) else None,
                result=result,
            )
            for cid in ids
        ]

    def _user(self, m: dict[str, Any], text: str) -> list[Event]:
        """The task (the first), an observation of the open 0.x action, or
        other feedback."""
        tid = self.trace_id
        if self._open is not None:
            name, self._open = self._open, None
            return [ToolResult(trace_id=tid, name=name, result=m.get("content"))]
        if self._tasked:
            return [Message(trace_id=tid, role="user", text=text)]
        self._tasked = True
        return [
            TurnStart(trace_id=tid, step=0, source="user"),
            Message(trace_id=tid, role="user", text=text),
        ]

    def _assistant(self, m: dict[str, Any], text: str) -> list[Event]:
        """Its text, then its 1.x ``tool_calls`` or else its 0.x ``action``."""
        tid = self.trace_id
        out: list[Event] = []
        if text:
            out.append(Message(trace_id=tid, role="assistant", text=text))
        calls = m.get("tool_calls")
        if calls:
            if not isinstance(calls, list):
                msg = "`tool_calls` must be a list"
                raise BadMessageError(msg, "tool_calls")
            for k, c in enumerate(calls):
                call = tool_call(c, tid, f"tool_calls[{k}]")
                if call.call_id is not None:
                    self._names[call.call_id] = call.name
                out.append(call)
            return out
        action = m.get("action")
        if isinstance(action, str) and action.strip():
            name = action.split(maxsplit=1)[0]
            out.append(ToolCall(trace_id=tid, name=name, args={"command": action}))
            self._open = name
        return out

    def end(self, events: list[Event], errors: list[InputError]) -> None:
        tid = self.trace_id
        info = self._info
        stats = info.get("model_stats")
        if isinstance(stats, dict):
            cost = stats.get("instance_cost")
            events.append(
                Usage(
                    trace_id=tid,
                    input_tokens=_count(stats.get("tokens_sent")),
                    output_tokens=_count(stats.get("tokens_received")),
                    cost_usd=finite(cost),
                )
            )
        submission = info.get("submission")
        if self._open is not None and isinstance(submission, str):
            # The last action's observation is in `trajectory` only; for
            # `submit` it is the submission.
            name, self._open = self._open, None
            events.append(ToolResult(trace_id=tid, name=name, result=submission))
        status = info.get("exit_status")
        failed = (
            None if not isinstance(status, str) else not status.startswith("submitted")
        )
        events.append(TraceEnd(trace_id=tid, result=submission, is_error=failed))


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class _SweAgentFormat:
    name = "swe-agent"
    summary = "SWE-agent .traj documents (0.x trajectory/history, 1.x history with tool_calls)"

    def sniff(self, record: object) -> bool:
        return False  # a document, never a line (see sniff_document)

    def sniff_document(self, shape: DocShape) -> bool:
        top = shape.top_keys
        if shape.is_array or "trajectory" not in top:
            return False
        return "history" in top or {"action", "observation"} <= shape.first_item_keys

    def reader(self, *, source: str, default_trace: str) -> SweAgentReader:
        return SweAgentReader(source=source, default_trace=default_trace)


FORMAT: Final = _SweAgentFormat()

#: What this module contributes to the registry.
FORMATS: Final = (FORMAT,)
