"""OpenTelemetry log records in OTLP/JSON (``ExportLogsServiceRequest``).

One line is one ``{"resourceLogs": [{"resource", "scopeLogs": [{"scope",
"logRecords": [...]}]}]}``, as the Collector's file exporter writes logs and
as trajgrade's OTLP receiver and Kafka source normalise every logs payload
(protobuf or JSON). It is read by the ``otel`` format, next to spans.

A record's event name is its ``eventName`` field, else its ``event.name``
attribute, else its body text, the first of them that trajgrade knows:

* agents' own events (``claude_code.*``, ``codex.*``, ``gemini_cli.*``):
  see :mod:`trajgrade.formats._otel_agents`; the trace is the agent's
  session attribute (on the record, else on its resource);
* GenAI semantic-convention events, trace = the record's ``traceId``:
  ``gen_ai.user.message`` → ``turn_start`` (user);
  ``gen_ai.assistant.message`` / ``gen_ai.choice`` → ``turn_start`` (agent)
  and a ``tool_call`` per entry of the body's ``tool_calls`` (or
  ``message.tool_calls``: ``id``, ``function.name``, ``function.arguments``);
  ``gen_ai.tool.message`` → ``tool_result`` (body ``id`` and ``content``).

Every other record is not an agent event and becomes nothing. A bad record
(a mapped event without its trace, a bad attribute) is an error located at
its line and field; the rest of the line is still read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from trajgrade.events import Event, ToolCall, ToolResult, TurnStart
from trajgrade.formats._otel_agents import AGENTS
from trajgrade.formats._otel_values import (
    BadValue,
    any_value,
    attributes,
    json_object,
    nanos,
)

if TYPE_CHECKING:
    from trajgrade.errors import InputError
    from trajgrade.formats._lines import RecordReader

__all__ = ("read_logs",)

_GENAI: Final = frozenset(
    {
        "gen_ai.user.message",
        "gen_ai.assistant.message",
        "gen_ai.choice",
        "gen_ai.tool.message",
    }
)


def _event_name(record: dict[str, Any], attrs: dict[str, Any], body: Any) -> str | None:
    for name in (record.get("eventName"), attrs.get("event.name"), body):
        if isinstance(name, str) and (name in _GENAI or name.startswith(_PREFIXES)):
            return name
    return None


_PREFIXES: Final = tuple(AGENTS)


def _ts(record: dict[str, Any]) -> float:
    raw = record.get("timeUnixNano")
    if raw in (None, 0, "0"):
        raw = record.get("observedTimeUnixNano")
    return nanos(raw, "timeUnixNano") / 1e9


def _genai(name: str, trace: str, body: Any, ts: float) -> list[Event]:
    if name == "gen_ai.user.message":
        return [TurnStart(trace_id=trace, ts=ts, source="user")]
    body = body if isinstance(body, dict) else {}
    if name == "gen_ai.tool.message":
        return [
            ToolResult(
                trace_id=trace,
                ts=ts,
                call_id=_opt_str(body.get("id")),
                result=body.get("content"),
            )
        ]
    message = body.get("message") if name == "gen_ai.choice" else body
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    events: list[Event] = [TurnStart(trace_id=trace, ts=ts, source="agent")]
    for i, call in enumerate(calls if isinstance(calls, list) else []):
        fn = call.get("function") if isinstance(call, dict) else None
        fname = fn.get("name") if isinstance(fn, dict) else None
        if not isinstance(fname, str) or not fname:
            msg = f"tool_calls[{i}] needs a function.name"
            raise BadValue(msg, field="body")
        raw = fn.get("arguments") if isinstance(fn, dict) else None
        events.append(
            ToolCall(
                trace_id=trace,
                ts=ts,
                name=fname,
                call_id=_opt_str(call.get("id")),
                args=raw if isinstance(raw, dict) else json_object(raw),
                args_raw=raw if isinstance(raw, str) else None,
            )
        )
    return events


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _record(
    record: dict[str, Any], resource: dict[str, Any]
) -> tuple[list[Event], str | None]:
    attrs = attributes(record.get("attributes"))
    body = any_value(record.get("body"), "body")
    name = _event_name(record, attrs, body)
    if name is None:
        return [], None
    ts = _ts(record)
    if name in _GENAI:
        trace = record.get("traceId")
        if not isinstance(trace, str) or not trace:
            msg = f"a {name} record needs a hex traceId to name its trace"
            raise BadValue(msg, field="traceId")
        return _genai(name, trace, body, ts), trace
    prefix = next(p for p in _PREFIXES if name.startswith(p))
    key, mapper = AGENTS[prefix]
    session = attrs.get(key, resource.get(key))
    if not isinstance(session, str) or not session:
        msg = f"a {name} record needs a string {key} attribute (its trace)"
        raise BadValue(msg, field="attributes")
    return mapper(name.removeprefix(prefix), session, attrs, ts), session


def _strings(raw: Any) -> dict[str, str]:
    """The string attributes of a raw ``KeyValue`` list, read leniently."""
    out: dict[str, str] = {}
    for kv in raw if isinstance(raw, list) else ():
        value = kv.get("value") if isinstance(kv, dict) else None
        text = value.get("stringValue") if isinstance(value, dict) else None
        if isinstance(text, str) and isinstance(kv.get("key"), str):
            out[kv["key"]] = text
    return out


def _trace_of(record: dict[str, Any], resource: dict[str, str]) -> str | None:
    """The trace a record that could not be read names, found in its raw
    fields as :func:`_record` would, so the error taints that session
    (None when the record names none: not an event trajgrade reads)."""
    attrs = _strings(record.get("attributes"))
    body = record.get("body")
    name = _event_name(
        record, attrs, body.get("stringValue") if isinstance(body, dict) else None
    )
    if name is None:
        return None
    if name in _GENAI:
        trace = record.get("traceId")
    else:
        key = AGENTS[next(p for p in _PREFIXES if name.startswith(p))][0]
        trace = attrs.get(key, resource.get(key))
    return trace if isinstance(trace, str) and trace else None


def read_logs(
    reader: RecordReader,
    record: dict[str, Any],
    n: int,
    events: list[Event],
    errors: list[InputError],
) -> None:
    """Append the events of one ``ExportLogsServiceRequest`` line."""
    for i, rl in enumerate(record["resourceLogs"]):
        rl = rl if isinstance(rl, dict) else {}
        res = rl.get("resource")
        raw_resource = res.get("attributes") if isinstance(res, dict) else None
        try:
            resource = attributes(raw_resource)
        except BadValue:
            resource = {}
        scopes = rl.get("scopeLogs")
        for j, sl in enumerate(scopes if isinstance(scopes, list) else []):
            logs = sl.get("logRecords") if isinstance(sl, dict) else None
            for k, lr in enumerate(logs if isinstance(logs, list) else []):
                where = f"resourceLogs[{i}].scopeLogs[{j}].logRecords[{k}]"
                if not isinstance(lr, dict):
                    msg = f"cannot read log record: expected an object, got {type(lr).__name__}"
                    errors.append(reader.error(msg, n, field=where))
                    continue
                try:
                    found, _ = _record(lr, resource)
                except BadValue as exc:
                    msg = f"cannot read log record: {exc.message}; fix the producer or the line"
                    trace = _trace_of(lr, _strings(raw_resource))
                    field = f"{where}.{exc.field}"
                    errors.append(reader.error(msg, n, field=field, trace=trace))
                    continue
                events.extend(found)
