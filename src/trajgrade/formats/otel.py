"""OpenTelemetry GenAI spans in OTLP/JSON export form (issue #5).

Lines holding log records (``resourceLogs``: agents' events) are read by
:mod:`trajgrade.formats.otel_logs`; metrics lines are accepted and skipped.

Each line is one ``ExportTraceServiceRequest`` as the collector's file
exporter writes it: ``{"resourceSpans": [{"resource", "scopeSpans": [{"scope",
"spans": [...]}]}]}``. Spans are read by the GenAI semantic conventions
(``gen_ai.operation.name`` and friends); attributes are OTLP ``{"key",
"value": AnyValue}`` pairs, whose ``stringValue``, ``intValue`` (a JSON string
or number), ``doubleValue``, ``boolValue``, ``bytesValue``, ``arrayValue`` and
``kvlistValue`` become Python values.

No real export was available when this reader was written: it and its test
fixtures (``tests/fixtures/otel/``) are built from the OTLP/JSON and GenAI
semantic-convention specifications, not from a recorded export.

Mapping:

* ``execute_tool`` span → ``tool_call`` (``gen_ai.tool.name``,
  ``gen_ai.tool.call.id``, ``gen_ai.tool.call.arguments`` — a JSON string is
  kept in ``args_raw`` and parsed into ``args`` when it is an object, a
  ``kvlistValue`` is ``args`` as is —, ``gen_ai.agent.name`` as ``agent``)
  then ``tool_result`` (``gen_ai.tool.call.result`` as written, ``is_error``,
  ``duration_ms`` = end - start).
* ``chat``, ``text_completion`` and ``generate_content`` span → ``turn_start``
  (source ``agent``), then ``usage`` when it has a ``gen_ai.usage.*`` token
  attribute, then ``error`` when the span failed.
* Every other span (``invoke_agent``, ``create_agent``, ``embeddings``,
  non-GenAI spans) → nothing.

Decisions:

1. The trace is the span's OTLP ``traceId`` (hex), never
   ``gen_ai.conversation.id``: the trace id is on every span, the
   conversation id only on some (often not on tool spans), so using it would
   split one run across two traces.
2. Events are ordered per export line, not globally: the spans of one line
   (across its resources and scopes) are sorted by ``startTimeUnixNano``
   (stable, so ties keep file order) before they are read. A span that comes
   in a later line is read after the whole earlier line.
3. There is no ``trace_end``: spans carry no end-of-trace marker and a root
   ``invoke_agent`` span may be exported before or after its children, so a
   trace ends at end of input.
4. One model response (a ``chat`` span) is one turn, as for ATIF steps.
5. ``input_tokens`` is ``gen_ai.usage.input_tokens`` as written: the
   convention says it includes cached tokens, so
   ``gen_ai.usage.cache_read.input_tokens`` and
   ``gen_ai.usage.cache_creation.input_tokens`` only fill
   ``cache_read_tokens`` / ``cache_write_tokens`` and are not added.
6. A span failed when its ``status.code`` is 2 (or ``STATUS_CODE_ERROR``) or
   it has an ``error.type`` attribute; a failed chat span's ``error`` carries
   ``status.message`` (else the error type) and ``error.type`` as ``code``.
7. ``ts`` is the span's start time in epoch seconds, for every event of it.
8. Tool content recorded as span events (older instrumentations) is not
   read; only the attributes are.

A malformed line (not an object, no ``resourceSpans`` list) or span (bad
attribute, no ``traceId``, no start time on a GenAI span or a time that is
not a 64-bit integer, a ``status.code`` that is neither a number nor a name,
a tool span without a name) is reported with its line and field, and the
span's trace is tainted; the rest of the line and of the stream is still
read. A ``gen_ai.operation.name`` that is not text names no operation: the
span is not GenAI.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final

from trajgrade.events import AgentError, Event, ToolCall, ToolResult, TurnStart, Usage
from trajgrade.formats._lines import RecordReader
from trajgrade.formats._otel_values import BadValue, attributes, json_object, nanos
from trajgrade.formats.otel_logs import read_logs

if TYPE_CHECKING:
    from trajgrade.errors import InputError

__all__ = ("FORMAT", "FORMATS", "OtelReader")

_TOOL: Final = "execute_tool"
_MODEL_CALLS: Final = frozenset({"chat", "text_completion", "generate_content"})
_ERROR_CODES: Final = frozenset({2, "STATUS_CODE_ERROR"})
#: A span's trace id as a broken line shows it (hex, or base64 by mistake).
_TRACE_IDS: Final = re.compile(rb'"traceId"\s*:\s*"([0-9A-Za-z+/=_-]{1,128})"')


class _Span:
    """One GenAI span, checked, ready to become events."""

    def __init__(self, span: dict[str, Any], attrs: dict[str, Any], op: str) -> None:
        tid = span.get("traceId")
        if not isinstance(tid, str) or not tid:
            msg = "a span needs a hex string traceId"
            raise BadValue(msg, field="traceId")
        self.trace = tid
        self.attrs = attrs
        self.start = nanos(span.get("startTimeUnixNano"), "startTimeUnixNano")
        end = span.get("endTimeUnixNano")
        self.end = None if end is None else nanos(end, "endTimeUnixNano")
        status = span.get("status")
        status = status if isinstance(status, dict) else {}
        code = status.get("code")
        if code is not None and not isinstance(code, int | float | str):
            msg = f"status.code must be a number or a name, got {type(code).__name__}"
            raise BadValue(msg, field="status.code")
        error_type = attrs.get("error.type")
        self.failed = code in _ERROR_CODES or error_type is not None
        self.error_type = None if error_type is None else str(error_type)
        message = status.get("message")
        self.message = message if isinstance(message, str) else ""
        #: The span's events, built now so a bad value is found in file order.
        self.events = self._tool() if op == _TOOL else self._model_call()

    @property
    def ts(self) -> float:
        return self.start / 1e9

    def _model(self) -> str | None:
        """The model that answered (``gen_ai.response.model``), else the one
        requested."""
        for key in ("gen_ai.response.model", "gen_ai.request.model"):
            value = self.attrs.get(key)
            if isinstance(value, str) and value:
                return value
        return None

    def _model_call(self) -> list[Event]:
        events: list[Event] = [
            TurnStart(trace_id=self.trace, ts=self.ts, source="agent")
        ]
        if any(k.startswith("gen_ai.usage.") for k in self.attrs):
            events.append(
                Usage(
                    trace_id=self.trace,
                    ts=self.ts,
                    input_tokens=self._count("gen_ai.usage.input_tokens"),
                    output_tokens=self._count("gen_ai.usage.output_tokens"),
                    cache_read_tokens=self._count(
                        "gen_ai.usage.cache_read.input_tokens"
                    ),
                    cache_write_tokens=self._count(
                        "gen_ai.usage.cache_creation.input_tokens"
                    ),
                    model=self._model(),
                )
            )
        if self.failed:
            events.append(
                AgentError(
                    trace_id=self.trace,
                    ts=self.ts,
                    message=self.message or self.error_type or "model call failed",
                    code=self.error_type,
                )
            )
        return events

    def _tool(self) -> list[Event]:
        name = self.attrs.get("gen_ai.tool.name")
        if not isinstance(name, str) or not name:
            msg = "an execute_tool span needs a string gen_ai.tool.name"
            raise BadValue(msg, field="attributes")
        cid = self._str("gen_ai.tool.call.id")
        raw = self.attrs.get("gen_ai.tool.call.arguments")
        args = raw if isinstance(raw, dict) else json_object(raw)
        duration = (
            None
            if self.end is None or self.end < self.start
            else (self.end - self.start) / 1e6
        )
        return [
            ToolCall(
                trace_id=self.trace,
                ts=self.ts,
                name=name,
                call_id=cid,
                args=args,
                args_raw=raw if isinstance(raw, str) else None,
                agent=self._str("gen_ai.agent.name"),
            ),
            ToolResult(
                trace_id=self.trace,
                ts=self.ts,
                call_id=cid,
                name=name,
                result=self.attrs.get("gen_ai.tool.call.result"),
                is_error=self.failed,
                duration_ms=duration,
            ),
        ]

    def _str(self, key: str) -> str | None:
        value = self.attrs.get(key)
        if value is None or isinstance(value, str):
            return value
        msg = f"{key} must be a string, got {type(value).__name__}"
        raise BadValue(msg, field="attributes")

    def _count(self, key: str) -> int:
        value = self.attrs.get(key, 0)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        msg = f"{key} must be a non-negative integer, got {value!r}"
        raise BadValue(msg, field="attributes")


def _spans(record: dict[str, Any]) -> list[tuple[str, Any]]:
    """(field, span) of every span of an export request, in file order."""
    found: list[tuple[str, Any]] = []
    for i, rs in enumerate(record["resourceSpans"]):
        scopes = rs.get("scopeSpans") if isinstance(rs, dict) else None
        for j, ss in enumerate(scopes if isinstance(scopes, list) else []):
            spans = ss.get("spans") if isinstance(ss, dict) else None
            for k, span in enumerate(spans if isinstance(spans, list) else []):
                found.append((f"resourceSpans[{i}].scopeSpans[{j}].spans[{k}]", span))
    return found


class OtelReader(RecordReader):
    """Translates OTLP/JSON export lines of GenAI spans to canonical events."""

    format = "otel"
    expected = 'an OTLP/JSON ExportTraceServiceRequest ({"resourceSpans": [...]}) or ExportLogsServiceRequest ({"resourceLogs": [...]})'

    def record(
        self, record: Any, n: int, events: list[Event], errors: list[InputError]
    ) -> None:
        if isinstance(record, dict) and isinstance(record.get("resourceLogs"), list):
            read_logs(self, record, n, events, errors)
            return
        if isinstance(record, dict) and isinstance(record.get("resourceMetrics"), list):
            return  # metrics carry no trajectory (accepted, not read)
        if not isinstance(record, dict) or not isinstance(
            record.get("resourceSpans"), list
        ):
            msg = f"expected an object with a resourceSpans list; each line must be {self.expected}"
            errors.append(self.error(msg, n))
            return
        read: list[_Span] = []
        for where, span in _spans(record):
            if not isinstance(span, dict):
                msg = f"cannot read span: expected an object, got {type(span).__name__}"
                errors.append(self.error(msg, n, field=where))
                continue
            tid = span.get("traceId")
            try:
                attrs = attributes(span.get("attributes"))
                op = attrs.get("gen_ai.operation.name")
                # (a value that is not text names no operation: not GenAI)
                if isinstance(op, str) and (op == _TOOL or op in _MODEL_CALLS):
                    read.append(_Span(span, attrs, op))
            except BadValue as exc:
                trace = tid if isinstance(tid, str) and tid else None
                errors.append(self._bad(exc, n, where, trace))
        read.sort(key=lambda s: s.start)
        for s in read:
            events.extend(s.events)

    def rejected(self, line: bytes, n: int, exc: Exception) -> list[InputError]:
        # An export line holds spans of many traces: each trace it names
        # loses spans, so each is tainted (one error per trace).
        msg = f"not valid JSON ({exc}); each line must be {self.expected}"
        traces = dict.fromkeys(m.group(1) for m in _TRACE_IDS.finditer(line))
        return [self.error(msg, n, trace=t.decode()) for t in traces] or [
            self.error(msg, n)
        ]

    def _bad(self, exc: BadValue, n: int, where: str, trace: str | None) -> InputError:
        field = f"{where}.{exc.field}"
        msg = f"cannot read span: {exc.message}; fix the producer or the line"
        return self.error(msg, n, field=field, trace=trace)


class _OtelFormat:
    name = "otel"
    summary = "OpenTelemetry, OTLP/JSON: GenAI spans ({resourceSpans: [...]}) and agents' log events ({resourceLogs: [...]}: Claude Code, Codex, Gemini CLI, gen_ai.*), one export request per line, as the collector's file exporter writes"

    def sniff(self, record: object) -> bool:
        return isinstance(record, dict) and any(
            isinstance(record.get(k), list)
            for k in ("resourceSpans", "resourceLogs", "resourceMetrics")
        )

    def reader(self, *, source: str, default_trace: str) -> OtelReader:
        return OtelReader(source=source, default_trace=default_trace)


FORMAT: Final = _OtelFormat()

#: What this module contributes to the registry.
FORMATS: Final = (FORMAT,)
