"""Gemini CLI JSONL chat sessions (``~/.gemini/tmp/<project>/chats/session-<ts>-<id>.jsonl``).

Newer Gemini CLI builds (read from 0.61.0) append to the session file
instead of rewriting one document: a header line (``sessionId``,
``projectHash``, ``startTime``, ``lastUpdated``, ``kind``), then one line
per message *version* — a message is written again, whole, each time it
changes (a ``gemini`` response first without, then with its ``toolCalls``
and their results) — and update records ``{"$set": {…}}`` (``lastUpdated``;
``messages``, a list of message objects) and ``{"$rewindTo": id}``.

Mapping (the same as the ``gemini-cli`` document format, per message id):

* the header → ``trace_start`` (``project_hash``, ``start_time``);
* ``type: "user"`` → ``message`` role ``user`` (``content``: a string, or
  the ``text`` of its parts; tool responses echoed as parts have none);
* ``type: "gemini"`` → ``turn_start`` (source ``agent``), ``message`` role
  ``reasoning`` per ``thoughts`` entry, ``message`` role ``assistant``, per
  ``toolCalls`` entry a ``tool_call`` and, once it is final, a
  ``tool_result``, then ``usage`` (``tokens``);
* ``type: "error"`` → ``error`` (``content``);
* ``$set.messages`` entries are read as message lines.

Decisions:

1. Trace id = the header's ``sessionId``; records before any header belong
   to the source's default trace. A header naming another session starts a
   new trace. There is no end marker, so no ``trace_end``.
2. Repeats: every event comes out once per message id. The ``turn_start``
   and ``error`` when the id is first seen; the user or assistant text at
   its first non-empty version (later edits are not re-emitted); thoughts
   by position, those beyond the ones already emitted.
3. Tool calls are keyed by their ``id`` (without one: message id and
   position). A call is emitted when first seen, its result when it first
   carries a final ``status`` (``success``, ``error``, ``cancelled``; or a
   ``result`` with no ``status`` at all). The result and ``is_error`` are
   read as in ``gemini-cli`` (decision 3 there); a call never final stays
   unanswered.
4. Usage is counted once per response: a message's ``tokens`` are held
   until it is known to be final — a line of another message, a new header
   or the end of input — then emitted with its last version's numbers
   (fields as in ``gemini-cli`` decision 4). Versions of a response seen
   after its usage was emitted add nothing; a response without an ``id``
   cannot be repeated and is counted at once.
5. Bounded state: the last 1024 message ids and 1024 call keys are
   remembered; a version of an older one would be read as new (Gemini CLI
   only rewrites its latest messages).
6. ``$rewindTo`` is skipped: what the agent did before a rewind happened,
   and messages after it have new ids. ``$set`` of other fields,
   ``info`` / ``warning`` messages and unknown records are skipped.
7. A line that is not an object, a ``$set`` or message that is not an
   object, a tool call without a string ``name`` or with a ``status`` that
   is not a string (the call is skipped), or a bad token count is a located
   input error for the trace; reading goes on.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeVar

from trajgrade.events import (
    AgentError,
    Message,
    TraceStart,
    TurnStart,
    Usage,
)
from trajgrade.formats._atif_fields import count, text_of
from trajgrade.formats._fields import BadField, opt_str
from trajgrade.formats._lines import RecordReader
from trajgrade.formats.gemini_cli import _FINAL, call_event, result_event
from trajgrade.formats.vally import parse_timestamp

if TYPE_CHECKING:
    from trajgrade.errors import InputError
    from trajgrade.events import Event

__all__ = ("FORMAT", "FORMATS", "GeminiJsonlReader")

_V = TypeVar("_V")

#: How many message ids and call keys are remembered (decision 5).
_KEEP: Final = 1024


@dataclass(slots=True)
class _Seen:
    """What one message id has emitted so far."""

    text: bool = False
    thoughts: int = 0
    counted: bool = False


def _remember(table: OrderedDict[str, _V], key: str, value: _V) -> None:
    table[key] = value
    if len(table) > _KEEP:
        table.popitem(last=False)


def _is_header(record: dict[str, Any]) -> bool:
    sid = record.get("sessionId")
    return "type" not in record and isinstance(sid, str) and bool(sid)


class GeminiJsonlReader(RecordReader):
    """Translates a Gemini CLI JSONL session to canonical events."""

    format = "gemini-cli-jsonl"
    expected = "a Gemini CLI session record (header, message or $set) object"

    def __init__(self, *, source: str, default_trace: str) -> None:
        super().__init__(source=source, default_trace=default_trace)
        self._trace: str | None = None
        self._messages: OrderedDict[str, _Seen] = OrderedDict()
        self._calls: OrderedDict[str, bool] = OrderedDict()  # key -> answered
        self._held: tuple[str, Usage] | None = None  # decision 4

    def record(
        self, record: Any, n: int, events: list[Event], errors: list[InputError]
    ) -> None:
        """One line: a header, an update record or a message version."""
        if not isinstance(record, dict):
            errors.append(
                self.error("each line must be an object", n, trace=self._trace)
            )
        elif _is_header(record):
            self._header(record, events)
        elif "$set" in record:
            update = record["$set"]
            messages = update.get("messages") if isinstance(update, dict) else None
            if not isinstance(update, dict) or not isinstance(messages, list | None):
                msg = "$set must be an object whose messages are a list"
                errors.append(self.error(msg, n, field="$set", trace=self._trace))
                return
            for m in messages or ():
                self._message(m, n, "$set.messages", events, errors)
        elif "type" in record:
            self._message(record, n, None, events, errors)

    def close(self) -> tuple[list[Event], list[InputError]]:
        """The end of input makes the last response final (decision 4)."""
        events: list[Event] = []
        self._flush(events)
        return events, []

    def flush_trace(self, trace_id: str) -> list[Event]:
        """The held usage, if it is ``trace_id``'s (the trace is being closed)."""
        events: list[Event] = []
        if trace_id == (self._trace or self._default):
            self._flush(events)
        return events

    def _header(self, record: dict[str, Any], events: list[Event]) -> None:
        sid = record["sessionId"]
        if sid == self._trace:
            return
        self._flush(events)
        self._trace = sid
        meta = {
            "project_hash": record.get("projectHash"),
            "start_time": record.get("startTime"),
        }
        kept = {k: v for k, v in meta.items() if isinstance(v, str)}
        events.append(TraceStart(trace_id=sid, metadata=kept or None))

    def _start(self, events: list[Event]) -> str:
        if self._trace is None:
            self._trace = self._default
            events.append(TraceStart(trace_id=self._trace))
        return self._trace

    def _flush(self, events: list[Event]) -> None:
        if self._held is not None:
            mid, usage = self._held
            self._held = None
            events.append(usage)
            seen = self._messages.get(mid)
            if seen is not None:
                seen.counted = True

    def _message(
        self,
        msg: Any,
        n: int,
        field: str | None,
        events: list[Event],
        errors: list[InputError],
    ) -> None:
        if not isinstance(msg, dict):
            errors.append(
                self.error(
                    "each message must be an object", n, field=field, trace=self._trace
                )
            )
            return
        raw_id = msg.get("id")
        mid = raw_id if isinstance(raw_id, str) and raw_id else None
        if self._held is not None and self._held[0] != mid:
            self._flush(events)
        tid = self._start(events)
        seen = self._messages.get(mid) if mid is not None else None
        new = seen is None
        if seen is None:
            seen = _Seen()
            if mid is not None:
                _remember(self._messages, mid, seen)
        ts = parse_timestamp(msg.get("timestamp"))
        kind = msg.get("type")
        if kind == "user":
            self._text(seen, "user", msg, tid, ts, events)
        elif kind == "error" and new:
            text = text_of(msg.get("content"))
            events.append(AgentError(trace_id=tid, ts=ts, message=text))
        elif kind == "gemini":
            if new:
                events.append(TurnStart(trace_id=tid, ts=ts, source="agent"))
            self._thoughts(seen, msg, tid, ts, events)
            self._text(seen, "assistant", msg, tid, ts, events)
            calls = msg.get("toolCalls")
            for i, call in enumerate(calls if isinstance(calls, list) else ()):
                self._call(call, i, f"{mid}#{i}", n, tid, ts, events, errors)
            if not seen.counted:
                self._usage(msg, mid, n, tid, ts, events, errors)

    def _text(
        self,
        seen: _Seen,
        role: str,
        msg: dict[str, Any],
        tid: str,
        ts: float | None,
        events: list[Event],
    ) -> None:
        text = "" if seen.text else text_of(msg.get("content"))
        if text:
            seen.text = True
            events.append(Message(trace_id=tid, ts=ts, role=role, text=text))

    def _thoughts(
        self,
        seen: _Seen,
        msg: dict[str, Any],
        tid: str,
        ts: float | None,
        events: list[Event],
    ) -> None:
        thoughts = msg.get("thoughts")
        if not isinstance(thoughts, list):
            return
        for t in thoughts[seen.thoughts :]:
            if not isinstance(t, dict):
                continue
            parts = [t.get("subject"), t.get("description")]
            text = ": ".join(p for p in parts if isinstance(p, str) and p)
            if text:
                when = parse_timestamp(t.get("timestamp")) or ts
                events.append(
                    Message(trace_id=tid, ts=when, role="reasoning", text=text)
                )
        seen.thoughts = max(seen.thoughts, len(thoughts))

    def _call(
        self,
        call: Any,
        i: int,
        position: str,
        n: int,
        tid: str,
        ts: float | None,
        events: list[Event],
        errors: list[InputError],
    ) -> None:
        name = call.get("name") if isinstance(call, dict) else None
        if not isinstance(call, dict) or not isinstance(name, str) or not name:
            msg = "a tool call must be an object with a string name"
            errors.append(self.error(msg, n, field="toolCalls", trace=tid))
            return
        try:
            status = opt_str(call, "status", f"toolCalls[{i}].")
        except BadField as exc:
            errors.append(self.error(exc.message, n, field=exc.field, trace=tid))
            return
        cid = call.get("id")
        call_id = cid if isinstance(cid, str) and cid else None
        key = call_id or position
        answered = self._calls.get(key)
        if answered is None:
            events.append(call_event(call, name, call_id, tid, ts))
        final = status in _FINAL or (status is None and call.get("result") is not None)
        if answered or not final:
            if answered is None:
                _remember(self._calls, key, False)
            return
        _remember(self._calls, key, True)
        events.append(result_event(call, name, call_id, tid, ts))

    def _usage(
        self,
        msg: dict[str, Any],
        mid: str | None,
        n: int,
        tid: str,
        ts: float | None,
        events: list[Event],
        errors: list[InputError],
    ) -> None:
        tokens = msg.get("tokens")
        if not isinstance(tokens, dict):
            return
        bad: list[str] = []
        thinking = count(tokens, "thoughts", bad)
        usage = Usage(
            trace_id=tid,
            ts=ts,
            input_tokens=count(tokens, "input", bad) + count(tokens, "tool", bad),
            output_tokens=count(tokens, "output", bad) + thinking,
            cache_read_tokens=count(tokens, "cached", bad),
            reasoning_tokens=thinking,
            model=model
            if isinstance(model := msg.get("model"), str) and model
            else None,
        )
        errors.extend(
            self.error(
                f"{key} must be a non-negative integer",
                n,
                field=f"tokens.{key}",
                trace=tid,
            )
            for key in bad
        )
        if mid is None:
            events.append(usage)
        else:
            self._held = (mid, usage)


class _GeminiJsonlFormat:
    name = "gemini-cli-jsonl"
    summary = "Gemini CLI JSONL chat sessions (~/.gemini/tmp/<project>/chats/session-*.jsonl, 0.61+), repeated message versions de-duplicated"

    def sniff(self, record: object) -> bool:
        """The header line: ``sessionId``, ``projectHash`` and ``startTime``
        strings, and neither a ``type`` (Claude Code, Codex) nor ``messages``
        (a ``gemini-cli`` document on one line)."""
        return (
            isinstance(record, dict)
            and _is_header(record)
            and "messages" not in record
            and isinstance(record.get("projectHash"), str)
            and isinstance(record.get("startTime"), str)
        )

    def reader(self, *, source: str, default_trace: str) -> GeminiJsonlReader:
        return GeminiJsonlReader(source=source, default_trace=default_trace)


FORMAT: Final = _GeminiJsonlFormat()

#: What this module contributes to the registry.
FORMATS: Final = (FORMAT,)
