"""vally trajectories: ``TrajectoryEvent`` lines or whole ``Trajectory`` records.

vally's events are ``{"type", "timestamp", "data": {...}}`` with camelCase
payloads (``toolName``, ``toolCallId``, ``arguments``, ``result``,
``success``). A line may also hold a whole ``Trajectory`` (``{"id"?,
"events": [...], ...}``); its events are translated in order and the trace
ends with it. Events without ``data`` are read as canonical events whose time
may be an ISO-8601 ``timestamp`` (how the metric conformance cases are
written).

Mapping: ``tool_call`` → ToolCall (``arguments`` object kept; a string is kept
raw and parsed once); ``tool_result`` → ToolResult (``success: false`` →
``is_error``); ``turn_start`` → TurnStart; ``usage`` (``inputTokens``/
``outputTokens``), ``error`` and message events when present. vally's other
event types are not public; they are skipped.

A field the event cannot hold (a ``toolCallId`` that is not a string, a
``durationMs`` that is not a number, a token count that is not a
non-negative integer, …) is an input error at its line and field
(``data.toolCallId``); that event is skipped and its trace tainted.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

import msgspec

from trajgrade.errors import InputError, Location
from trajgrade.events import (
    EVENT_TYPES,
    AgentError,
    Event,
    Message,
    ToolCall,
    ToolResult,
    TraceEnd,
    TurnStart,
    Usage,
)
from trajgrade.formats._atif_fields import parse_args
from trajgrade.formats._fields import (
    BadField,
    count,
    field_of,
    finite,
    opt_bool,
    opt_number,
    opt_str,
    req_str,
)
from trajgrade.formats._lines import RecordReader
from trajgrade.formats._positions import Positions
from trajgrade.formats._sniff import sniff_trace_id

__all__ = ("FORMAT", "FORMATS", "VallyReader", "parse_timestamp")


def parse_timestamp(value: Any) -> float | None:
    """ISO-8601 text or epoch seconds -> epoch seconds; None when absent/invalid."""
    if isinstance(value, str):  # (the common case first: agents write text)
        if not value:
            return None
        try:
            return datetime.fromisoformat(value).timestamp()
        except (ValueError, OverflowError, OSError):  # (a naive time far out)
            return None
    return finite(value)  # (an integer too large for a float is invalid)


class VallyReader(RecordReader):
    """Translates vally events (and whole trajectories) to canonical events."""

    format = "vally"
    expected = "one vally event or trajectory"

    def __init__(self, *, source: str, default_trace: str) -> None:
        super().__init__(source=source, default_trace=default_trace)
        self._positions = Positions(self._default)

    def record(
        self, record: Any, n: int, events: list[Event], errors: list[InputError]
    ) -> None:
        if not isinstance(record, dict):
            msg = f"expected a JSON object, got {type(record).__name__}"
            errors.append(self.error(msg, n, trace=self._default))
        elif isinstance(record.get("events"), list):
            self._trajectory(record, n, events, errors)
        else:
            self._event(record, self._default, n, "", events, errors)

    def undecodable(self, line: bytes, n: int, exc: Exception) -> InputError:
        # The record is lost, not its trace: an event line belongs to the
        # trace it names, else the source's; a trajectory line is still
        # counted, so later unnamed trajectories keep their names.
        tid = sniff_trace_id(line)
        if tid is None and b'"events"' in line:
            tid = self._positions.next()
        msg = f"not valid JSON ({exc}); each line must be {self.expected}"
        return self.error(msg, n, trace=tid or self._default)

    def _trajectory(
        self, doc: dict[str, Any], n: int, events: list[Event], errors: list[InputError]
    ) -> None:
        positional = self._positions.next()
        tid = doc.get("id")
        if not isinstance(tid, str) or not tid:
            tid = positional
        for i, ev in enumerate(doc["events"]):
            self._event(ev, tid, n, f"events[{i}].", events, errors)
        events.append(TraceEnd(trace_id=tid, result=doc.get("output")))

    def _event(
        self,
        ev: Any,
        tid: str,
        n: int,
        prefix: str,
        events: list[Event],
        errors: list[InputError],
    ) -> None:
        where = Location(file=self._source, line=n, field=f"{prefix}type")
        if not isinstance(ev, dict):
            errors.append(
                InputError(
                    f"expected an event object, got {type(ev).__name__}",
                    location=where,
                    trace_id=tid,
                )
            )
            return
        kind = ev.get("type")
        ts = parse_timestamp(ev.get("timestamp", ev.get("ts")))
        data = ev.get("data")
        try:
            if isinstance(data, dict):
                out = self._from_data(kind, data, tid, ts)
            else:
                out = self._canonical(ev, tid, ts)
        except BadField as exc:
            field = f"{prefix}{exc.field}" if exc.field else prefix.rstrip(".") or None
            what = f"vally {kind!r}" if isinstance(kind, str) else "a vally"
            msg = (
                f"cannot read {what} event: {exc.message}; fix the producer or the line"
            )
            errors.append(
                InputError(
                    msg,
                    location=Location(file=self._source, line=n, field=field),
                    trace_id=tid,
                )
            )
            return
        if out is not None:
            events.append(out)

    @staticmethod
    def _from_data(
        kind: Any, d: dict[str, Any], tid: str, ts: float | None
    ) -> Event | None:
        if kind == "tool_call":
            args, raw = parse_args(d.get("arguments"))
            return ToolCall(
                trace_id=tid,
                ts=ts,
                name=req_str(d, "toolName", "data."),
                call_id=opt_str(d, "toolCallId", "data."),
                args=args,
                args_raw=raw,
            )
        if kind == "tool_result":
            success = opt_bool(d, "success", "data.")
            return ToolResult(
                trace_id=tid,
                ts=ts,
                call_id=opt_str(d, "toolCallId", "data."),
                name=opt_str(d, "toolName", "data."),
                result=d.get("result"),
                is_error=None if success is None else not success,
                duration_ms=opt_number(d, "durationMs", "data."),
            )
        if kind == "turn_start":
            return TurnStart(trace_id=tid, ts=ts)
        if kind == "usage":
            return Usage(
                trace_id=tid,
                ts=ts,
                input_tokens=count(d, "inputTokens", "data."),
                output_tokens=count(d, "outputTokens", "data."),
                model=m if isinstance(m := d.get("model"), str) and m else None,
            )
        if kind == "error":
            return AgentError(trace_id=tid, ts=ts, message=str(d.get("message", "")))
        if kind in ("message", "assistant_message", "user_message"):
            role = d.get("role") or ("user" if kind == "user_message" else "assistant")
            return Message(
                trace_id=tid, ts=ts, role=str(role), text=str(d.get("content", ""))
            )
        if not isinstance(kind, str):
            # (an unknown type is skipped; one that is not a name is broken)
            got = "missing" if kind is None else type(kind).__name__
            msg = f"type must be a string, got {got}"
            raise BadField(msg, "type")
        return None

    @staticmethod
    def _canonical(ev: dict[str, Any], tid: str, ts: float | None) -> Event | None:
        kind = ev.get("type")
        if not isinstance(kind, str) or kind not in EVENT_TYPES:
            # Without `data` this is a canonical event, whose types are known:
            # a misspelt type must not vanish silently.
            known = ", ".join(sorted(EVENT_TYPES))
            got = repr(kind) if isinstance(kind, str) else type(kind).__name__
            msg = f"unknown event type {got}; expected one of {known}"
            raise BadField(msg, "type")
        fields = {k: v for k, v in ev.items() if k != "timestamp"}
        fields.setdefault("trace_id", tid)
        fields["ts"] = ts
        try:
            event: Event = msgspec.convert(fields, Event)
        except msgspec.ValidationError as exc:
            reason, field = field_of(exc)
            raise BadField(reason, field) from None
        return event


class _VallyFormat:
    name = "vally"
    summary = "vally TrajectoryEvent lines ({type, timestamp, data}) or Trajectory documents ({events: [...]})"

    def sniff(self, record: object) -> bool:
        if not isinstance(record, dict):
            return False
        if isinstance(record.get("items"), list):
            return False  # an AI GO! Trace (items, and maybe events too)
        return isinstance(record.get("events"), list) or (
            isinstance(record.get("data"), dict) and isinstance(record.get("type"), str)
        )

    def reader(self, *, source: str, default_trace: str) -> VallyReader:
        return VallyReader(source=source, default_trace=default_trace)


FORMAT: Final = _VallyFormat()

#: What this module contributes to the registry.
FORMATS: Final = (FORMAT,)
