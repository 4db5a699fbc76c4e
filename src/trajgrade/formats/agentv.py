"""agentv traces: one JSON record per line, each a whole trace.

Two record shapes (seed 001 and agentv's CLI provider / JSONL results):

* ``{"id"?, "text"?, "output" | "output_messages": [message, ...],
  "token_usage"?: {"input", "output", "cached"?}, "cost_usd"?, "duration_ms"?}``
  with messages ``{"role", "content"?, "tool_calls"?: [{"tool", "input"?,
  "output"?, "id"?, "timestamp"? | "start_time"?, "end_time"?,
  "duration_ms"?, "status"?}]}``, read as agentv's CLI provider
  (``parseOutputContent``) reads it: ``output`` wins over ``output_messages``
  when both are lists (even an empty one), and a record without messages
  becomes one assistant message with its ``text`` (JavaScript's ``String()``
  of it), else the record's JSON text;
* the legacy static trace ``{"text"?, "trace": [{"type": "tool_call" |
  "tool_result", "id", "name", "input" | "output", "timestamp" |
  "startTime"}]}``, read as agentv's ``cat-trace.ts`` converts it: results
  are paired to calls by ``id`` into one assistant message (no message at all
  when ``trace`` is empty).

Mapping, in message order: each message -> Message (role, ``content`` text;
a message without content still counts as output for ``tool_trajectory``'s
"no trace" rule); each call -> ToolCall, followed at once by a ToolResult
when the call carries ``output``, ``duration_ms`` or ``status``. ``input``
is kept as agentv uses it: an object becomes ``args``; a string is *not*
parsed and stays in ``args_raw`` (so object expectations never match it);
any other JSON value, ``null`` included, is kept as its JSON text in
``args_json`` (agentv compares it as that value; a missing ``input`` is
undefined). ``duration_ms`` (any number: agentv keeps a negative per-call
duration) goes on the ToolResult; durations are never derived from start/end
times, as in agentv. A result needs a call id to pair with: calls without
``id`` get ``agentv-call-<n>`` (n = the call's index in the record).
``token_usage`` and ``cost_usd`` become one Usage event; ``text`` is the
TraceEnd result. The record's own ``duration_ms`` has no canonical event and
is not read.

Trace id: the record's ``id``, else the source's default trace for the first
record and ``<default>#<n>`` for the n-th. Every record ends with TraceEnd.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from trajgrade._util.js import js_number
from trajgrade.errors import InputError, Location
from trajgrade.events import Event, Message, ToolCall, ToolResult, TraceEnd, Usage
from trajgrade.formats._fields import finite
from trajgrade.formats._lines import RecordReader
from trajgrade.formats._positions import Positions
from trajgrade.formats._sniff import sniff_string
from trajgrade.formats.vally import parse_timestamp

__all__ = ("FORMAT", "FORMATS", "AgentvReader")

_JSON: Final = msgspec.json.Decoder()
_ENCODE: Final = msgspec.json.Encoder()
_LEGACY: Final = ("tool_call", "tool_result")


class AgentvReader(RecordReader):
    """Translates agentv trace records to canonical events."""

    format = "agentv"
    expected = "one agentv trace record"

    def __init__(self, *, source: str, default_trace: str) -> None:
        super().__init__(source=source, default_trace=default_trace)
        self._positions = Positions(self._default)
        #: Calls seen per transcript trace (ids for calls that carry none).
        self._transcript_calls: dict[str, int] = {}

    def record(
        self, record: Any, n: int, events: list[Event], errors: list[InputError]
    ) -> None:
        if not isinstance(record, dict):
            msg = f"expected a JSON object (an agentv trace record), got {type(record).__name__}"
            errors.append(self.error(msg, n, trace=self._positions.next()))
        elif _is_transcript_line(record):
            self._transcript_line(record, n, events, errors)
        else:
            _Record(self, record, n, events, errors).read()

    def undecodable(self, line: bytes, n: int, exc: Exception) -> InputError:
        # A lost transcript line taints its test's trace; a lost record is
        # still counted, so later unnamed records keep their names, and its
        # positional trace ends in `error`.
        tid = None
        if b'"message_index"' in line:
            tid = sniff_string(line, "test_id")
        msg = f"not valid JSON ({exc}); each line must be {self.expected}"
        return self.error(msg, n, trace=tid or self._positions.next())

    def _transcript_line(
        self,
        record: dict[str, Any],
        n: int,
        events: list[Event],
        errors: list[InputError],
    ) -> None:
        # agentv's transcript JSONL: one message a line, grouped by `test_id`;
        # no line ends the trace (end of input does).
        test_id = record.get("test_id")
        tid = (
            str(test_id)
            if isinstance(test_id, str | int) and test_id != ""
            else self._default
        )
        rec = _Record(self, record, n, events, errors, tid=tid)
        rec.calls = self._transcript_calls.get(tid, 0)
        rec._message(record, "")
        self._transcript_calls[tid] = rec.calls

    def _error(
        self, msg: str, n: int, field: str | None = None, trace: str | None = None
    ) -> InputError:
        where = Location(file=self._source, line=n, field=field)
        return InputError(msg, location=where, trace_id=trace)

    def _trace_id(self, record: dict[str, Any]) -> str:
        positional = self._positions.next()
        tid = record.get("id")
        return tid if isinstance(tid, str) and tid else positional


class _Record:
    """One record being translated (its trace id, line and call counter)."""

    __slots__ = ("calls", "errors", "events", "line", "reader", "record", "tid")

    def __init__(
        self,
        reader: AgentvReader,
        record: dict[str, Any],
        line: int,
        events: list[Event],
        errors: list[InputError],
        *,
        tid: str | None = None,
    ) -> None:
        self.reader = reader
        self.record = record
        self.line = line
        self.events = events
        self.errors = errors
        self.tid = tid if tid is not None else reader._trace_id(record)
        self.calls = 0

    def read(self) -> None:
        doc = self.record
        text = doc.get("text")
        # agentv's CLI provider (parseOutputContent) reads `output ??
        # output_messages`: `output` wins when both are there, even when empty.
        key = next(
            (k for k in ("output", "output_messages") if isinstance(doc.get(k), list)),
            None,
        )
        if key is not None and doc[key]:
            for i, msg in enumerate(doc[key]):
                self._message(msg, f"{key}[{i}]")
        elif key is None and isinstance(doc.get("trace"), list):
            self._legacy(doc["trace"], text if isinstance(text, str) else "")
        else:
            # No messages: the provider answers with one assistant message,
            # the record's `text` (as JavaScript's String() prints it), else
            # the record itself, so a record is never "no trace" upstream.
            content = js_string(text) if "text" in doc else _ENCODE.encode(doc).decode()
            self.events.append(
                Message(trace_id=self.tid, role="assistant", text=content)
            )
        self._usage(doc.get("token_usage"), doc.get("cost_usd"))
        self.events.append(TraceEnd(trace_id=self.tid, result=text))

    def _fail(self, msg: str, field: str) -> None:
        self.errors.append(self.reader._error(msg, self.line, field, self.tid))

    def _message(self, msg: Any, at: str) -> None:
        if not isinstance(msg, dict):
            self._fail(f"expected a message object, got {type(msg).__name__}", at)
            return
        role = msg.get("role")
        self.events.append(
            Message(
                trace_id=self.tid,
                role=role if isinstance(role, str) and role else "assistant",
                text=_text(msg.get("content")),
            )
        )
        calls = msg.get("tool_calls")
        if calls is None:
            return
        if not isinstance(calls, list):
            self._fail(
                f"tool_calls must be a list, got {type(calls).__name__}",
                f"{at}.tool_calls",
            )
            return
        for j, call in enumerate(calls):
            self._call(call, f"{at}.tool_calls[{j}]")

    def _legacy(self, trace: list[Any], text: str) -> None:
        if not trace:
            return
        # cat-trace.ts: the last tool_result per id wins; results match by id only.
        outputs = {
            e["id"]: e
            for e in trace
            if isinstance(e, dict)
            and e.get("type") == "tool_result"
            and isinstance(e.get("id"), str)
        }
        self.events.append(Message(trace_id=self.tid, role="assistant", text=text))
        for i, e in enumerate(trace):
            if not (
                isinstance(e, dict) and e.get("type") == "tool_call" and e.get("name")
            ):
                continue
            call = {"tool": e["name"], "id": e.get("id")}
            if "input" in e:
                call["input"] = e["input"]
            call["timestamp"] = e.get("timestamp", e.get("startTime"))
            cid = e.get("id")
            result = outputs.get(cid) if isinstance(cid, str) else None
            if result is not None and "output" in result:
                call["output"] = result["output"]
            self._call(call, f"trace[{i}]", name_key="name")

    def _call(self, call: Any, at: str, *, name_key: str = "tool") -> None:
        name = call.get("tool") if isinstance(call, dict) else None
        if not isinstance(name, str):
            got = "missing" if name is None else type(name).__name__
            self._fail(
                f"a tool call needs a string `{name_key}` (got {got}); fix the producer",
                f"{at}.{name_key}",
            )
            return
        assert isinstance(call, dict)
        index = self.calls
        self.calls += 1
        args, raw, json_args = _input(call)
        ts = parse_timestamp(call.get("timestamp", call.get("start_time")))
        # Any number, negative ones included: agentv's CLI provider drops only a
        # negative record-level duration_ms and reports "a completed in -5ms".
        duration = finite(call.get("duration_ms"))
        status = call.get("status")
        is_error = (
            {"error": True, "success": False}.get(status)
            if isinstance(status, str)
            else None
        )
        returned = "output" in call or duration is not None or is_error is not None
        cid = call.get("id")
        if not (isinstance(cid, str) and cid):
            cid = f"agentv-call-{index}" if returned else None
        self.events.append(
            ToolCall(
                trace_id=self.tid,
                ts=ts,
                name=name,
                call_id=cid,
                args=args,
                args_raw=raw,
                args_json=json_args,
            )
        )
        if not returned:
            return
        end = parse_timestamp(call.get("end_time"))
        self.events.append(
            ToolResult(
                trace_id=self.tid,
                ts=end if end is not None else ts,
                call_id=cid,
                name=name,
                result=call.get("output"),
                is_error=is_error,
                duration_ms=duration,
            )
        )

    def _usage(self, usage: Any, cost: Any) -> None:
        tokens = usage if isinstance(usage, dict) else {}
        if not tokens and not _is_amount(cost):
            return
        self.events.append(
            Usage(
                trace_id=self.tid,
                input_tokens=_count(tokens.get("input")),
                output_tokens=_count(tokens.get("output")),
                cache_read_tokens=_count(tokens.get("cached")),
                cost_usd=float(cost) if _is_amount(cost) else None,
            )
        )


def _is_amount(value: Any) -> bool:
    number = finite(value)  # (an integer too large for a float is not one)
    return number is not None and number >= 0


def _count(value: Any) -> int:
    return int(value) if _is_amount(value) else 0


def _input(
    call: dict[str, Any],
) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """(args, args_raw, args_json): an object, a string, or any other JSON value
    (``null`` included: agentv compares a null input, unlike a missing one)."""
    if "input" not in call:
        return None, None, None
    value = call["input"]
    if isinstance(value, dict):
        return value, None, None
    if isinstance(value, str):
        return None, value, None
    return None, None, _ENCODE.encode(value).decode()


def js_string(value: Any) -> str:
    """JavaScript's ``String(value)`` for a JSON value."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        try:
            return js_number(value)
        except OverflowError:  # an integer past a double: JSON.parse's Infinity
            return "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, list):
        return ",".join("" if v is None else js_string(v) for v in value)
    return "[object Object]"


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = (p.get("text") if isinstance(p, dict) else p for p in content)
        return "".join(p for p in parts if isinstance(p, str))
    return _ENCODE.encode(content).decode()


class _AgentvFormat:
    name = "agentv"
    summary = "agentv trace records ({output_messages | output: [...]} or legacy {text, trace: [...]}), one per line"

    def sniff(self, record: object) -> bool:
        if not isinstance(record, dict) or "type" in record or "object" in record:
            return False
        if _is_transcript_line(record):
            return True
        if isinstance(record.get("output_messages"), list):
            return True
        trace = record.get("trace")
        if isinstance(trace, list):
            return all(isinstance(e, dict) and e.get("type") in _LEGACY for e in trace)
        output = record.get("output")
        if not isinstance(output, list):
            return False
        if not output:
            return True  # agentv's CLI record with no messages ("type"/"object" excluded above)
        # OpenResponses items carry a "type"; agentv messages carry a role.
        first = output[0]
        return isinstance(first, dict) and "type" not in first and "role" in first

    def reader(self, *, source: str, default_trace: str) -> AgentvReader:
        return AgentvReader(source=source, default_trace=default_trace)


FORMAT: Final = _AgentvFormat()

#: What this module contributes to the registry.
FORMATS: Final = (FORMAT,)


def _is_transcript_line(record: dict[str, Any]) -> bool:
    """One message of agentv's transcript JSONL (``test_id``, ``message_index``, ``role``)."""
    return (
        "test_id" in record
        and isinstance(record.get("message_index"), int)
        and isinstance(record.get("role"), str)
    )
