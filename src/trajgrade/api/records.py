"""What :meth:`StreamGrader.feed` takes, as the one line it is graded as.

A mapping or a text record goes through the same format readers as a log
line, so it is written as one: JSON, newline-terminated. What no line could
hold is refused here (the grader keeps it in ``errors``), and what is not a
record at all raises.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, NamedTuple

import msgspec

from trajgrade._util.json_values import Problem, json_problem
from trajgrade.api.checks import escaped

__all__ = ("Refused", "record_line")

_ENC: Final = msgspec.json.Encoder()
_LONE: Final = re.compile("[\ud800-\udfff]")


class Refused(NamedTuple):
    """A mapping no JSON line can hold: the record as read, and why."""

    record: Mapping[str, Any]
    problem: Problem


def record_line(item: object) -> bytes | Refused:
    """``item`` (a mapping, or one JSON line as ``str``/``bytes``) as the
    newline-terminated line a log would hold.

    Raises TypeError for anything else and ValueError for several lines.
    """
    if isinstance(item, Mapping):
        record = item if type(item) is dict else dict(item)
        # (msgspec would write bytes as base64 text, a NaN as null: a
        # record a line could not hold is refused, not graded as that)
        problem, _ = json_problem(record)
        if problem is not None:
            return Refused(record, problem)
        try:
            line = _ENC.encode(record)
        except UnicodeEncodeError:  # a lone surrogate (json.loads of a Node log)
            as_json = escaped(record)
            if as_json is None:
                return Refused(record, Problem("", "not JSON"))
            line = as_json
    elif isinstance(item, str):
        try:
            line = item.encode()
        except UnicodeEncodeError:  # written as the escape a Node host writes
            line = _LONE.sub(lambda m: f"\\u{ord(m[0]):04x}", item).encode()
    elif isinstance(item, bytes | bytearray | memoryview):
        line = bytes(item)
    else:
        msg = f"cannot grade a {type(item).__name__}; feed an Event, a mapping, or a JSON line (str/bytes)"
        raise TypeError(msg)
    if b"\n" in line.rstrip(b"\r\n"):
        msg = "feed() takes one record; pass several lines (or raw chunks) to feed_bytes()"
        raise ValueError(msg)
    if not line.endswith(b"\n"):
        line += b"\n"
    return line
