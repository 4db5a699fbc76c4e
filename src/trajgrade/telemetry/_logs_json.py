"""OTLP/JSON logs into the official ``ExportLogsServiceRequest`` message, fast.

``json_format.ParseDict`` walks every field through descriptors in pure
Python (~0.15 ms a log record: the receiver's bottleneck for JSON bodies).
Logs are the agents' path, so their JSON is mapped here onto the generated
message classes directly, field by field, with protobuf's JSON mapping and
OTLP's exceptions: lowerCamelCase or original snake_case keys, 64-bit
integers as numbers or decimal strings, ``NaN``/``Infinity`` doubles,
base64 ``bytesValue``, hex ``traceId``/``spanId``, enums as integers (or
their names), unknown fields ignored. The message classes check every value
(type, range), so what is built is a valid message or a :class:`BadPayload`;
the tests check it serialises exactly as ``ParseDict``'s would.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Final

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
)
from opentelemetry.proto.logs.v1.logs_pb2 import SeverityNumber

__all__ = ("BadLogs", "logs_message")

_SPECIAL: Final = {
    "NaN": float("nan"),
    "Infinity": float("inf"),
    "-Infinity": float("-inf"),
}


class BadLogs(Exception):
    """Not an OTLP/JSON ExportLogsServiceRequest: the reason and the place."""


def _get(d: dict[str, Any], camel: str, snake: str) -> Any:
    value = d.get(camel)
    return d.get(snake) if value is None else value


def _obj(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        msg = f"{where}: expected an object, got {type(value).__name__}"
        raise BadLogs(msg)
    return value


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        msg = f"{where}: expected a list, got {type(value).__name__}"
        raise BadLogs(msg)
    return value


def _int(value: Any, where: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    if isinstance(value, float) and value.is_integer():
        return int(value)
    msg = f"{where}: expected an integer, got {value!r}"
    raise BadLogs(msg)


def _hex(value: Any, where: str) -> bytes:
    if not isinstance(value, str):
        msg = f"{where}: expected a hex string, got {value!r}"
        raise BadLogs(msg)
    try:
        return bytes.fromhex(value)
    except ValueError:
        msg = f"{where}: an id must be hex (OTLP/JSON), got {value[:40]!r}"
        raise BadLogs(msg) from None


def _any(target: Any, raw: Any, where: str) -> None:
    """Fill ``AnyValue`` ``target`` from its JSON form."""
    raw = _obj(raw, where)
    for key, value in raw.items():
        if key in ("stringValue", "string_value"):
            target.string_value = value
        elif key in ("boolValue", "bool_value"):
            target.bool_value = value
        elif key in ("intValue", "int_value"):
            target.int_value = _int(value, f"{where}.intValue")
        elif key in ("doubleValue", "double_value"):
            target.double_value = _SPECIAL.get(value, value)
        elif key in ("bytesValue", "bytes_value"):
            try:
                target.bytes_value = base64.b64decode(value, validate=True)
            except (binascii.Error, TypeError, ValueError):
                msg = f"{where}.bytesValue: not base64"
                raise BadLogs(msg) from None
        elif key in ("arrayValue", "array_value"):
            arr = target.array_value
            arr.SetInParent()
            for i, v in enumerate(_list(_obj(value, where).get("values"), where)):
                _any(arr.values.add(), v, f"{where}.arrayValue.values[{i}]")
        elif key in ("kvlistValue", "kvlist_value"):
            kvl = target.kvlist_value
            kvl.SetInParent()
            _kvs(
                kvl.values,
                _obj(value, where).get("values"),
                f"{where}.kvlistValue.values",
            )


def _kvs(target: Any, raw: Any, where: str) -> None:
    for i, kv in enumerate(_list(raw, where)):
        kv = _obj(kv, f"{where}[{i}]")
        item = target.add()
        item.key = kv.get("key", "")
        value = kv.get("value")
        if value is not None:
            item.value.SetInParent()  # an empty AnyValue is still present
            _any(item.value, value, f"{where}[{i}].value")


def _attributes(target: Any, raw: dict[str, Any], where: str) -> None:
    """A resource's or a scope's attributes and dropped-attribute count."""
    _kvs(target.attributes, raw.get("attributes"), f"{where}.attributes")
    dropped = _get(raw, "droppedAttributesCount", "dropped_attributes_count")
    if dropped is not None:
        target.dropped_attributes_count = _int(dropped, where)


#: A log record's integer fields (OTLP/JSON spelling, protobuf field).
_INT_FIELDS: Final = (
    ("timeUnixNano", "time_unix_nano"),
    ("observedTimeUnixNano", "observed_time_unix_nano"),
    ("droppedAttributesCount", "dropped_attributes_count"),
    ("flags", "flags"),
)


def _record(r: Any, raw: dict[str, Any], where: str) -> None:
    for camel, snake in _INT_FIELDS:
        value = _get(raw, camel, snake)
        if value is not None:
            setattr(r, snake, _int(value, f"{where}.{camel}"))
    sev = _get(raw, "severityNumber", "severity_number")
    if sev is not None:
        r.severity_number = (
            SeverityNumber.Value(sev)
            if isinstance(sev, str)
            else _int(sev, f"{where}.severityNumber")
        )
    for camel, snake in (
        ("severityText", "severity_text"),
        ("eventName", "event_name"),
    ):
        value = _get(raw, camel, snake)
        if value is not None:
            setattr(r, snake, value)
    for camel, snake in (("traceId", "trace_id"), ("spanId", "span_id")):
        value = _get(raw, camel, snake)
        if value:
            setattr(r, snake, _hex(value, f"{where}.{camel}"))
    body = raw.get("body")
    if body is not None:
        r.body.SetInParent()
        _any(r.body, body, f"{where}.body")
    _kvs(r.attributes, raw.get("attributes"), f"{where}.attributes")


def logs_message(tree: dict[str, Any]) -> ExportLogsServiceRequest:
    """The message of an OTLP/JSON logs request; :class:`BadLogs` if it is not one."""
    msg = ExportLogsServiceRequest()
    try:
        for i, rl_raw in enumerate(
            _list(_get(tree, "resourceLogs", "resource_logs"), "resourceLogs")
        ):
            where = f"resourceLogs[{i}]"
            rl_raw = _obj(rl_raw, where)
            rl = msg.resource_logs.add()
            res = rl_raw.get("resource")
            if res is not None:
                res = _obj(res, f"{where}.resource")
                rl.resource.SetInParent()
                _attributes(rl.resource, res, f"{where}.resource")
            schema = _get(rl_raw, "schemaUrl", "schema_url")
            if schema is not None:
                rl.schema_url = schema
            scopes = _get(rl_raw, "scopeLogs", "scope_logs")
            for j, sl_raw in enumerate(_list(scopes, f"{where}.scopeLogs")):
                swhere = f"{where}.scopeLogs[{j}]"
                sl_raw = _obj(sl_raw, swhere)
                sl = rl.scope_logs.add()
                scope = sl_raw.get("scope")
                if scope is not None:
                    scope = _obj(scope, f"{swhere}.scope")
                    sl.scope.SetInParent()
                    sl.scope.name = scope.get("name", "")
                    sl.scope.version = scope.get("version", "")
                    _attributes(sl.scope, scope, f"{swhere}.scope")
                schema = _get(sl_raw, "schemaUrl", "schema_url")
                if schema is not None:
                    sl.schema_url = schema
                records = _get(sl_raw, "logRecords", "log_records")
                for k, raw in enumerate(_list(records, f"{swhere}.logRecords")):
                    rwhere = f"{swhere}.logRecords[{k}]"
                    _record(sl.log_records.add(), _obj(raw, rwhere), rwhere)
    except (TypeError, ValueError, AttributeError, OverflowError) as exc:
        # The generated classes refuse a wrong type or an out-of-range number.
        msg_text = f"not an OTLP/JSON ExportLogsServiceRequest: {exc}"
        raise BadLogs(msg_text) from None
    return msg
