"""OpenAI chat-completions message lists (tool loops such as tau-bench).

Two formats share one mapping (``_openai_chat_messages``):

* ``openai-chat``: JSONL, one conversation per line — ``{"messages": [...]}``
  (optionally with ``trace_id``/``id``/``conversation_id`` and other fields),
  a tau-bench run ``{task_id, trial, reward, info, traj}``, or a bare JSON
  array of messages;
* ``openai-chat-json``: one JSON document, read incrementally — a JSON array
  of such runs/conversations (tau-bench's ``historical_trajectories/*.json``),
  or one ``{"messages": [...]}`` object, whose messages are read one at a
  time. A bare array of messages is read too when this format is named
  (``--format openai-chat-json``); it is not auto-detected, as it has
  mini-swe-agent's shape (so has a ``{"messages"}`` object with a top-level
  ``info``: mini-swe-agent's saved-run wrapper).

Mapping (``role``): ``user`` → ``turn_start`` (source ``user``, ``step`` =
the turn's index) and ``message``; ``assistant`` → ``message`` (when it has
text) and one ``tool_call`` per ``tool_calls`` entry (``id``,
``function.name``; ``function.arguments`` kept verbatim in ``args_raw`` and
parsed once into ``args``); ``tool`` → ``tool_result`` (``tool_call_id``,
``name``, ``content`` as written); any other role (``system``,
``developer``, …) → ``message`` with that role. List content is its text
parts joined by a newline.

Decisions:

1. Pairing is by id (``tool_call_id`` ↔ ``tool_calls[].id``); calls without
   a result stay unanswered.
2. Turns: one per ``user`` message (tau-bench's simulated customer); the
   format has no other marker.
3. Errors: the format has no error flag, so ``is_error`` is left unset;
   failures are text in the ``tool`` content. A run whose ``info.error`` is
   set (a crashed tau-bench run) gets an ``error`` event and ends with
   ``is_error``.
4. No timestamps and no usage exist in these lists: none are emitted.
5. Trace id: the conversation's ``trace_id``/``id``/``conversation_id``, else
   tau-bench's ``<task_id>/<trial>``, else the source's default trace
   (``<source>``, ``<source>#2``, … by position; an undecodable line still
   takes its position). A ``{"messages"}`` document's ``trace_id``/``id``
   counts when it comes before the messages. The run's other fields
   (``reward``, ``info``, …) are ``trace_start`` metadata.
6. Every conversation is finished: it ends with ``trace_end``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from trajgrade.events import TraceEnd
from trajgrade.formats._document import DocShape, DocumentReader
from trajgrade.formats._lines import RecordReader
from trajgrade.formats._openai_chat_messages import (
    ID_KEYS,
    MESSAGE_KEYS,
    BadMessageError,
    Conversation,
    run_events,
    run_id,
)
from trajgrade.formats._positions import Positions
from trajgrade.formats._sniff import sniff_trace_id

if TYPE_CHECKING:
    from trajgrade.errors import InputError
    from trajgrade.events import Event

__all__ = ("DOCUMENT", "FORMAT", "FORMATS", "ChatDocumentReader", "ChatLinesReader")

#: mini-swe-agent's fenced action block: a message list holding it is not ours.
_MSWEA: Final = "```mswea_bash_command"


class ChatLinesReader(RecordReader):
    """``openai-chat``: one conversation per JSON line."""

    format = "openai-chat"
    expected = 'one chat conversation ({"messages": [...]} or a JSON array of messages)'

    def __init__(self, *, source: str, default_trace: str) -> None:
        super().__init__(source=source, default_trace=default_trace)
        self._positions = Positions(default_trace)

    def undecodable(self, line: bytes, n: int, exc: Exception) -> InputError:
        positional = self._positions.next()  # later names stay stable
        msg = f"not valid JSON ({exc}); each line must be {self.expected}"
        return self.error(msg, n, trace=sniff_trace_id(line) or positional)

    def record(
        self, record: Any, n: int, events: list[Event], errors: list[InputError]
    ) -> None:
        positional = self._positions.next()
        tid = run_id(record) or positional
        if not isinstance(record, dict | list):
            msg = f"expected a chat conversation, got {type(record).__name__}"
            errors.append(self.error(msg, n, trace=tid))
            return
        got, bad = run_events(record, tid)
        events.extend(got)
        for at, exc in bad:
            field = ".".join(p for p in (at, exc.field) if p) or None
            errors.append(self.error(exc.message, n, field=field, trace=tid))


class ChatDocumentReader(DocumentReader):
    """``openai-chat-json``: an array of conversations, or one conversation."""

    format = "openai-chat-json"
    ITEMS = ("item", "messages.item")
    SCALARS = ("trace_id", "id")

    def __init__(self, *, source: str, default_trace: str) -> None:
        super().__init__(source=source, default_trace=default_trace)
        self._positions = Positions(default_trace)
        #: The conversation of a ``{"messages"}`` document or bare message array.
        self._conv: Conversation | None = None
        self._index = 0
        self._current = default_trace

    @property
    def trace_id(self) -> str:
        return self._current

    def fault_trace(self) -> str | None:
        run = self._root if self._stack else None
        if self._conv is not None or (isinstance(run, dict) and "role" in run):
            return self._current  # one conversation: the trace being read
        if isinstance(run, dict):
            # Inside a run (the document broke there, or the run is too
            # deep): the run's own trace, when what was read of it names
            # it for sure; never the run before, which was whole.
            named = any(k in run for k in ID_KEYS) or "trial" in run
            return run_id(run) if named else None
        return None  # between runs, or in one dropped: none is being read

    def item(
        self, prefix: str, obj: Any, events: list[Event], errors: list[InputError]
    ) -> None:
        at = f"{prefix.removesuffix('.item')}[{self._index}]"
        self._index += 1
        if prefix == "item" and not (isinstance(obj, dict) and "role" in obj):
            tid = run_id(obj) or self._positions.next()
            self._current = tid
            got, bad = run_events(obj, tid)
            events.extend(got)
            for sub, exc in bad:
                field = ".".join(p for p in (at, sub, exc.field) if p)
                errors.append(self.error(exc.message, field=field, trace=tid))
            return
        if self._conv is None:
            named = next(
                (self.scalars[k] for k in self.SCALARS if k in self.scalars), None
            )
            self._current = str(named) if named is not None else self._default
            self._conv = Conversation(self._current)
        try:
            events.extend(self._conv.message(obj))
        except BadMessageError as exc:
            field = f"{at}.{exc.field}" if exc.field else at
            errors.append(self.error(exc.message, field=field, trace=self._current))

    def end(self, events: list[Event], errors: list[InputError]) -> None:
        if self._conv is not None:
            events.append(TraceEnd(trace_id=self._conv.tid))


def _is_message(m: object) -> bool:
    return isinstance(m, dict) and isinstance(m.get("role"), str) and "type" not in m


def _is_message_list(value: object) -> bool:
    if not isinstance(value, list) or not value or not _is_message(value[0]):
        return False
    # mini-swe-agent writes the same {role, content} list, with fenced actions.
    return not any(
        isinstance(m, dict)
        and m.get("role") == "assistant"
        and isinstance(m.get("content"), str)
        and _MSWEA in m["content"]
        for m in value
    )


class _ChatLinesFormat:
    name = "openai-chat"
    summary = 'OpenAI chat-completions conversations, one per line: {"messages": [...]}, a tau-bench run {task_id, traj}, or a bare message array'

    def sniff(self, record: object) -> bool:
        if isinstance(record, list):
            return _is_message_list(record)
        if not isinstance(record, dict) or "type" in record:
            return False
        return any(_is_message_list(record.get(k)) for k in MESSAGE_KEYS)

    def reader(self, *, source: str, default_trace: str) -> ChatLinesReader:
        return ChatLinesReader(source=source, default_trace=default_trace)


class _ChatDocumentFormat:
    name = "openai-chat-json"
    summary = 'OpenAI chat-completions conversations as one JSON document: an array of runs (tau-bench {task_id, traj}) or of {"messages"}, or one {"messages": [...]}'

    def sniff(self, record: object) -> bool:
        return False  # a document, never a line (see sniff_document)

    def sniff_document(self, shape: DocShape) -> bool:
        first = shape.first_item_keys
        if shape.is_array:
            # Runs, not messages; tau-bench's `traj`, or `messages` per entry.
            return "traj" in first or ("messages" in first and "type" not in first)
        return (
            "messages" in shape.top_keys
            and "role" in first
            and "content" in first
            and "type" not in first
            and "steps" not in shape.top_keys  # ATIF
            and "info" not in shape.top_keys  # mini-swe-agent's saved run
        )

    def reader(self, *, source: str, default_trace: str) -> ChatDocumentReader:
        return ChatDocumentReader(source=source, default_trace=default_trace)


FORMAT: Final = _ChatLinesFormat()
DOCUMENT: Final = _ChatDocumentFormat()

#: What this module contributes to the registry.
FORMATS: Final = (FORMAT, DOCUMENT)
