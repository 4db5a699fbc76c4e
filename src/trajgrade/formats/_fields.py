"""Typed reads of input values, shared by the readers.

Every value a reader puts into an event field goes through a check of its
type, because the engine and the graders rely on the declared types (a call
id is hashed, a duration compared, a name matched). These helpers read one
field of a decoded object: absent (or ``null``) reads as the field's empty
value; a value of another type raises :class:`BadField`, which names the
field, so the reader reports it at its line (the record is rejected and its
trace tainted) and goes on.

A reader's own error class derives from :class:`BadField`, so one ``except
BadField`` catches both.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import msgspec

__all__ = (
    "BadField",
    "count",
    "field_of",
    "finite",
    "opt_bool",
    "opt_number",
    "opt_str",
    "req_str",
)


class BadField(Exception):
    """A value a reader cannot use: the message, and the field path
    (relative to the object read; None: the object itself)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


#: Where msgspec's validation message names the bad field.
_AT: Final = re.compile(r" - at `\$\.?(.*)`$")


def field_of(exc: msgspec.ValidationError) -> tuple[str, str | None]:
    """msgspec's message without its location, and the field path it names."""
    text = str(exc)
    m = _AT.search(text)
    if m is None:
        return text, None
    return text[: m.start()], m.group(1) or None


def _bad(at: str, key: str, wanted: str, value: Any) -> BadField:
    path = f"{at}{key}"
    got = "missing" if value is None else type(value).__name__
    return BadField(f"{path} must be {wanted}, got {got}", path)


def finite(value: Any) -> float | None:
    """``value`` as a float when it is a finite JSON number (not a bool; an
    integer too large for a float is not finite), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def opt_str(d: dict[str, Any], key: str, at: str = "") -> str | None:
    """``d[key]``: a string, or None when absent or null. ``at`` prefixes
    the field path (``data.``)."""
    value = d.get(key)
    if value is None or isinstance(value, str):
        return value
    raise _bad(at, key, "a string", value)


def req_str(d: dict[str, Any], key: str, at: str = "") -> str:
    """``d[key]``, which must be a string."""
    value = d.get(key)
    if isinstance(value, str):
        return value
    raise _bad(at, key, "a string", value)


def opt_number(d: dict[str, Any], key: str, at: str = "") -> float | None:
    """``d[key]``: a finite number, as a float; None when absent or null."""
    value = d.get(key)
    if value is None:
        return None
    number = finite(value)
    if number is None:
        raise _bad(at, key, "a finite number", value)
    return number


def opt_bool(d: dict[str, Any], key: str, at: str = "") -> bool | None:
    """``d[key]``: true or false; None when absent or null."""
    value = d.get(key)
    if value is None or isinstance(value, bool):
        return value
    raise _bad(at, key, "true or false", value)


def count(d: dict[str, Any], key: str, at: str = "") -> int:
    """``d[key]``: a non-negative integer (an integral float is taken as
    one); 0 when absent or null."""
    value = d.get(key)
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, float) and value >= 0 and value.is_integer():
        return int(value)
    raise _bad(at, key, "a non-negative integer", value)
