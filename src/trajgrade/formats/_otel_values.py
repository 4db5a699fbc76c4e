"""OTLP/JSON value decoding for the ``otel`` format: attributes, times, JSON text.

OTLP/JSON is the protobuf JSON mapping of the OTLP messages: 64-bit integers
(``intValue``, ``*TimeUnixNano``) may be written as JSON strings or numbers,
``doubleValue`` may be ``"NaN"``/``"Infinity"``, and an empty ``AnyValue``
(``{}``) is an unset value.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import msgspec

from trajgrade._util.depth import decode_bounded

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = (
    "REFUSED",
    "BadValue",
    "any_value",
    "attributes",
    "json_object",
    "nanos",
)

_JSON: Final = msgspec.json.Decoder()
_SPECIAL_DOUBLES: Final = frozenset({"NaN", "Infinity", "-Infinity"})
#: The values of OTLP's 64-bit integers, signed (``int64``) or not (``fixed64``).
_INT64: Final = range(-(2**63), 2**64)
#: The longest decimal text of one (a sign and 20 digits, with some spaces).
_INT_DIGITS: Final = 32
#: The one-key object trajgrade's OTLP receiver puts in place of a value it
#: refused (nested too deep for one line): read as an error naming the value.
REFUSED: Final = "trajgrade.refused"
#: What a kind's reader answers for a value that kind cannot hold (None is
#: a value: an empty ``AnyValue`` inside an array).
_INVALID: Final = object()


class BadValue(Exception):
    """A value that does not follow OTLP/JSON: (field inside the span, message)."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def _int(raw: Any, field: str) -> int:
    value: int | None = None
    if isinstance(raw, int) and not isinstance(raw, bool):
        value = raw
    elif isinstance(raw, str) and len(raw) <= _INT_DIGITS:
        try:
            value = int(raw)
        except ValueError:
            pass
    if value is not None and value in _INT64:
        return value
    msg = (
        f"expected a 64-bit integer (a JSON number or decimal string), got {raw!r:.60}"
    )
    raise BadValue(msg, field=field)


def nanos(raw: Any, field: str) -> int:
    """A ``*TimeUnixNano`` field: nanoseconds since the epoch."""
    if raw is None:
        msg = f"{field} is missing"
        raise BadValue(msg, field=field)
    return _int(raw, field)


def _value(raw: Any, field: str) -> Any:
    """An OTLP ``AnyValue`` as a Python value (None when unset)."""
    if not isinstance(raw, dict):
        msg = f"an AnyValue must be an object, got {type(raw).__name__}"
        raise BadValue(msg, field=field)
    if not raw:
        return None
    if len(raw) != 1:
        msg = f"an AnyValue has exactly one kind, got {sorted(raw)}"
        raise BadValue(msg, field=field)
    ((kind, value),) = raw.items()
    if kind == REFUSED:
        refusal = str(value)
        raise BadValue(refusal, field=field)
    where = f"{field}.{kind}"
    read = _KINDS.get(kind)
    got = _INVALID if read is None else read(value, where)
    if got is _INVALID:
        msg = f"not a valid AnyValue {kind}: {value!r:.60}"
        raise BadValue(msg, field=where)
    return got


def _text(value: Any, where: str) -> Any:
    return value if isinstance(value, str) else _INVALID


def _bool(value: Any, where: str) -> Any:
    return value if isinstance(value, bool) else _INVALID


def _double(value: Any, where: str) -> Any:
    if (isinstance(value, (int, float)) and not isinstance(value, bool)) or (
        isinstance(value, str) and value in _SPECIAL_DOUBLES
    ):
        try:
            return float(value)
        except OverflowError:  # an integer too large for a double
            pass
    return _INVALID


def _array(value: Any, where: str) -> Any:
    items = value.get("values", []) if isinstance(value, dict) else None
    if not isinstance(items, list):
        return _INVALID
    return [_value(v, f"{where}.values[{i}]") for i, v in enumerate(items)]


def _kvlist(value: Any, where: str) -> Any:
    if not isinstance(value, dict):
        return _INVALID
    return attributes(value.get("values"), f"{where}.values")


#: How each ``AnyValue`` kind is read (``intValue`` raises its own error).
_KINDS: Final[dict[str, Callable[[Any, str], Any]]] = {
    "stringValue": _text,
    "bytesValue": _text,
    "boolValue": _bool,
    "intValue": _int,
    "doubleValue": _double,
    "arrayValue": _array,
    "kvlistValue": _kvlist,
}


def any_value(raw: Any, field: str) -> Any:
    """A log record's ``body`` (or any single ``AnyValue``); None when absent."""
    return None if raw is None else _value(raw, field)


def attributes(raw: Any, field: str = "attributes") -> dict[str, Any]:
    """A list of OTLP ``KeyValue`` pairs as a dict (a repeated key: the last wins)."""
    if raw is None:
        return {}
    if not isinstance(raw, list):
        msg = (
            f"attributes must be a list of key/value objects, got {type(raw).__name__}"
        )
        raise BadValue(msg, field=field)
    out: dict[str, Any] = {}
    for i, kv in enumerate(raw):
        where = f"{field}[{i}]"
        key = kv.get("key") if isinstance(kv, dict) else None
        if not isinstance(key, str):
            msg = f"an attribute must be an object with a string key, got {kv!r}"
            raise BadValue(msg, field=where)
        out[key] = _value(kv.get("value", {}), f"{where}.value")
    return out


def json_object(raw: Any) -> dict[str, Any] | None:
    """``raw`` parsed as JSON text, when it is a string holding a JSON object."""
    if not isinstance(raw, str):
        return None
    try:
        parsed = decode_bounded(_JSON, raw)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    return parsed if isinstance(parsed, dict) else None
