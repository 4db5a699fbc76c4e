"""OTLP request bodies in, one normalised OTLP/JSON line out; responses back.

Every OTLP payload trajgrade receives (HTTP protobuf or JSON, a Kafka record
in ``otlp_proto`` or ``otlp_json``) is decoded with the official
``opentelemetry-proto`` messages, so a malformed payload is refused as a
whole, then written as one line of OTLP/JSON: exactly what the Collector's
file exporter writes and what the ``otel`` format reads. One reader, one
mapping, whatever the transport.

OTLP/JSON is protobuf's JSON mapping with the exceptions of the OTLP
specification, handled here both ways: ``traceId``/``spanId``/
``parentSpanId`` are hex, not base64; enums are integers; keys are
lowerCamelCase (receivers also accept the original snake_case names, as
``ParseDict`` does); unknown fields are ignored.
"""

from __future__ import annotations

import base64
import binascii
import sys
from typing import Any, Final

import msgspec
from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from trajgrade._util.depth import MAX_DEPTH, too_deep
from trajgrade.formats._otel_values import REFUSED
from trajgrade.telemetry._logs_json import BadLogs, logs_message

__all__ = (
    "SIGNALS",
    "BadPayload",
    "Decoded",
    "TooLarge",
    "decode",
    "logs_tree",
    "response",
    "status",
)

_JSON: Final = msgspec.json.Decoder()
_ENC: Final = msgspec.json.Encoder()
#: The byte fields OTLP/JSON writes as hex.
_ID_KEYS: Final = frozenset(
    {"traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id"}
)


class _Signal:
    """One OTLP signal: its request/response messages and record names."""

    def __init__(
        self,
        request: type[Message],
        response: type[Message],
        top: str,
        records: tuple[str, str],
        rejected: str,
    ) -> None:
        self.request = request
        self.response = response
        self.top = top  # resourceLogs / resourceSpans / resourceMetrics
        self.records = records  # (scope list, record list) keys
        self.rejected = rejected  # partialSuccess counter name


#: Path → signal.
SIGNALS: Final = {
    "/v1/logs": _Signal(
        logs_service_pb2.ExportLogsServiceRequest,
        logs_service_pb2.ExportLogsServiceResponse,
        "resourceLogs",
        ("scopeLogs", "logRecords"),
        "rejectedLogRecords",
    ),
    "/v1/traces": _Signal(
        trace_service_pb2.ExportTraceServiceRequest,
        trace_service_pb2.ExportTraceServiceResponse,
        "resourceSpans",
        ("scopeSpans", "spans"),
        "rejectedSpans",
    ),
    "/v1/metrics": _Signal(
        metrics_service_pb2.ExportMetricsServiceRequest,
        metrics_service_pb2.ExportMetricsServiceResponse,
        "resourceMetrics",
        ("scopeMetrics", "metrics"),
        "rejectedDataPoints",
    ),
}


class BadPayload(Exception):
    """A body that is not the request message it claims to be (HTTP 400)."""


class TooLarge(BadPayload):
    """A body with more values than the receiver expands (HTTP 413)."""


def _too_many(limit: int) -> TooLarge:
    msg = (
        f"the request holds more than {limit:,} values (records, attributes, "
        "array items); send smaller batches"
    )
    return TooLarge(msg)


def _check_size(msg: Message, limit: int) -> None:
    """Refuse a message of more than ``limit`` sub-messages before it is
    expanded into Python values (~450 bytes each, from 2 bytes of protobuf)."""
    left = limit
    stack = [msg]
    while stack:
        for field, value in stack.pop().ListFields():
            if field.message_type is None:
                continue
            if field.is_repeated:
                left -= len(value)
                stack.extend(value)
            else:
                left -= 1
                stack.append(value)
            if left < 0:
                raise _too_many(limit)


class Decoded(msgspec.Struct, frozen=True):
    """One request: its OTLP/JSON line (no newline) and how many records it holds."""

    line: bytes
    records: int


def _convert_ids(node: Any, convert: Any) -> Any:
    """Rewrite every id field below ``node`` in place with ``convert``."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _ID_KEYS and isinstance(value, str):
                node[key] = convert(value)
            elif isinstance(value, (dict, list)):
                _convert_ids(value, convert)
    elif isinstance(node, list):
        for item in node:
            if isinstance(item, (dict, list)):
                _convert_ids(item, convert)
    return node


def _hex_to_b64(value: str) -> str:
    try:
        return base64.b64encode(bytes.fromhex(value)).decode()
    except ValueError:
        msg = f"an id must be hex (OTLP/JSON), got {value[:40]!r}"
        raise BadPayload(msg) from None


def _b64_to_hex(value: str) -> str:
    return base64.b64decode(value).hex()


def _message(signal: _Signal, body: bytes, content_type: str) -> Message:
    msg = signal.request()
    if content_type == "application/x-protobuf":
        try:
            msg.ParseFromString(body)
        except (DecodeError, RecursionError) as exc:
            error = f"not a protobuf {signal.request.__name__}: {exc}"
            raise BadPayload(error) from None
        return msg
    try:
        tree = _JSON.decode(body) if body else {}
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as exc:
        error = f"not JSON: {exc}"
        raise BadPayload(error) from None
    if not isinstance(tree, dict):
        error = f"an OTLP/JSON body is an object ({signal.request.__name__})"
        raise BadPayload(error)
    if signal.top == "resourceLogs":
        try:
            return logs_message(tree)
        except (BadLogs, RecursionError) as exc:
            raise BadPayload(str(exc)) from None
    try:
        json_format.ParseDict(
            _convert_ids(tree, _hex_to_b64), msg, ignore_unknown_fields=True
        )
    except (json_format.ParseError, RecursionError, binascii.Error) as exc:
        error = f"not an OTLP/JSON {signal.request.__name__}: {exc}"
        raise BadPayload(error) from None
    return msg


def _count(signal: _Signal, tree: dict[str, Any]) -> int:
    scopes, records = signal.records
    return sum(
        len(s.get(records, ()))
        for r in tree.get(signal.top, ())
        for s in r.get(scopes, ())
    )


def decode(
    path: str, body: bytes, content_type: str, *, max_values: int | None = None
) -> Decoded:
    """The OTLP/JSON line of one request body (``content_type`` without
    parameters: ``application/x-protobuf`` or ``application/json``); with
    ``max_values``, a body of more values than that is :class:`TooLarge`."""
    signal = SIGNALS[path]
    try:
        msg = _message(signal, body, content_type)
        if path == "/v1/logs":
            tree = logs_tree(msg, max_values)
        else:
            if max_values is not None and len(body) > 2 * max_values:
                # (Smaller bodies cannot hold that many: 2 bytes at least each.)
                _check_size(msg, max_values)
            tree = json_format.MessageToDict(msg, use_integers_for_enums=True)
            _convert_ids(tree, _b64_to_hex)
        line = _ENC.encode(tree)
        if _may_nest_deep(line) and too_deep(line):
            _refuse_deep_values(tree)
            line = _ENC.encode(tree)
    except RecursionError:
        msg_text = f"not an OTLP {signal.request.__name__}: nested too deep to read"
        raise BadPayload(msg_text) from None
    return Decoded(line, _count(signal, tree))


#: Levels an AnyValue that nests another one needs below itself (a kvlist:
#: ``kvlistValue``, ``values``, the pair, the inner value).
_NESTING: Final = 4
_TOO_DEEP: Final = (
    f"a value nested too deep for one line of OTLP/JSON ({MAX_DEPTH} levels) "
    "was refused by trajgrade's receiver"
)


#: OTLP/JSON's own structure, to a span event's attribute value.
_STRUCTURE: Final = 12


def _may_nest_deep(line: bytes) -> bool:
    """Whether ``line`` has AnyValues enough to nest past the bound (each
    level of them has one of these keys): two C-speed counts instead of
    measuring every request (2.5 ms for 400 KB)."""
    nesting = line.count(b'"kvlistValue"') + line.count(b'"arrayValue"')
    return _STRUCTURE + _NESTING * nesting >= MAX_DEPTH


def _refuse_deep_values(tree: dict[str, Any]) -> None:
    """Put a refusal in place of every AnyValue whose contents would nest
    the line past :data:`MAX_DEPTH`, so the line is read and only the
    records holding such a value are errors (located, tainting their own
    trace), not the whole request. OTLP's own structure is a dozen levels:
    only AnyValues nest without bound. Walked without recursion."""
    stack: list[tuple[Any, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        items = list(node.items() if isinstance(node, dict) else enumerate(node))
        for key, child in items:
            if not isinstance(child, (dict, list)):
                continue
            if (
                depth + 1 + _NESTING > MAX_DEPTH
                and isinstance(child, dict)
                and ("arrayValue" in child or "kvlistValue" in child)
            ):
                node[key] = {REFUSED: _TOO_DEEP}
            else:
                stack.append((child, depth + 1))


def response(path: str, content_type: str, rejected: int, message: str) -> bytes:
    """An ``Export*ServiceResponse``, with ``partial_success`` when records were rejected."""
    signal = SIGNALS[path]
    tree: dict[str, Any] = {}
    if rejected or message:
        tree["partialSuccess"] = {signal.rejected: rejected, "errorMessage": message}
    if content_type == "application/x-protobuf":
        out: bytes = json_format.ParseDict(tree, signal.response()).SerializeToString()
        return out
    return _ENC.encode(tree)


def status(code: int, message: str, content_type: str) -> bytes:
    """A ``google.rpc.Status`` body, as OTLP/HTTP wants for 4xx and 5xx answers."""
    from google.rpc import status_pb2

    st = status_pb2.Status(code=code, message=message)
    out: bytes = (
        st.SerializeToString()
        if content_type == "application/x-protobuf"
        else json_format.MessageToJson(st, indent=None).encode()
    )
    return out


# ---------------------------------------------------------------- fast logs
# json_format walks messages in pure Python (~0.5 ms a log record). Logs are
# the agents' path, so their OTLP/JSON tree is built here from the decoded
# message directly, field by field (same output as MessageToDict with hex
# ids; checked by the tests).
class _Budget:
    """Values a logs tree may still hold (see :class:`TooLarge`)."""

    __slots__ = ("left", "limit")

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.left = sys.maxsize if limit is None else limit

    def over(self) -> TooLarge:
        return _too_many(self.limit or 0)


def _any(v: Any, budget: _Budget) -> dict[str, Any]:
    kind = v.WhichOneof("value")
    if kind is None:
        return {}
    if kind == "string_value":
        return {"stringValue": v.string_value}
    if kind == "int_value":
        return {"intValue": str(v.int_value)}
    if kind == "bool_value":
        return {"boolValue": v.bool_value}
    if kind == "double_value":
        return {"doubleValue": v.double_value}
    if kind == "bytes_value":
        return {"bytesValue": base64.b64encode(v.bytes_value).decode()}
    if kind == "array_value":
        values = v.array_value.values
        budget.left -= len(values)
        if budget.left < 0:
            raise budget.over()
        return {"arrayValue": {"values": [_any(x, budget) for x in values]}}
    return {"kvlistValue": {"values": _kvs(v.kvlist_value.values, budget)}}


def _kvs(kvs: Any, budget: _Budget) -> list[dict[str, Any]]:
    # (Counted inline: a method call per attribute list costs ~7% of decoding.)
    budget.left -= len(kvs)
    if budget.left < 0:
        raise budget.over()
    return [{"key": kv.key, "value": _any(kv.value, budget)} for kv in kvs]


def _log_record(r: Any, budget: _Budget) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if r.time_unix_nano:
        out["timeUnixNano"] = str(r.time_unix_nano)
    if r.observed_time_unix_nano:
        out["observedTimeUnixNano"] = str(r.observed_time_unix_nano)
    if r.severity_number:
        out["severityNumber"] = int(r.severity_number)
    if r.severity_text:
        out["severityText"] = r.severity_text
    if r.HasField("body"):
        out["body"] = _any(r.body, budget)
    if r.attributes:
        out["attributes"] = _kvs(r.attributes, budget)
    if r.trace_id:
        out["traceId"] = r.trace_id.hex()
    if r.span_id:
        out["spanId"] = r.span_id.hex()
    if r.event_name:
        out["eventName"] = r.event_name
    if r.flags:
        out["flags"] = r.flags
    if r.dropped_attributes_count:
        out["droppedAttributesCount"] = r.dropped_attributes_count
    return out


def logs_tree(msg: Any, max_values: int | None = None) -> dict[str, Any]:
    budget = _Budget(max_values)
    resource_logs = []
    budget.left -= len(msg.resource_logs)
    for rl in msg.resource_logs:
        scopes = []
        budget.left -= len(rl.scope_logs)
        for sl in rl.scope_logs:
            budget.left -= len(sl.log_records)
            if budget.left < 0:
                raise budget.over()
            scope: dict[str, Any] = {
                "logRecords": [_log_record(r, budget) for r in sl.log_records]
            }
            if sl.HasField("scope"):
                scope["scope"] = {"name": sl.scope.name, "version": sl.scope.version}
            scopes.append(scope)
        entry: dict[str, Any] = {"scopeLogs": scopes}
        if rl.HasField("resource"):
            entry["resource"] = {"attributes": _kvs(rl.resource.attributes, budget)}
        resource_logs.append(entry)
    return {"resourceLogs": resource_logs}
