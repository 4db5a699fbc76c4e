"""The shared skeleton of formats that hold one JSON record per line.

A subclass says what a line should be (``expected``, for messages) and turns
one decoded record into events (``record``); the line loop, blank lines,
undecodable lines (located, and charged to the trace they name) and the
per-event line numbers live here once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Final

import msgspec

from trajgrade.errors import InputError, Location
from trajgrade.formats._sniff import sniff_trace_id

if TYPE_CHECKING:
    from trajgrade.events import Event

__all__ = ("RecordIndex", "RecordReader", "nonblank_lines")

_JSON: Final = msgspec.json.Decoder()


class RecordIndex(list[int]):
    """Per event, the index of its record among the non-blank lines of the
    buffer it came from (0 = the first non-blank line).

    A reader that decodes a whole buffer in one ``decode_lines`` call (which
    skips blank lines) knows this without counting lines; the line numbers
    are derived from it only when a message needs one (``nonblank_lines``).
    """


def nonblank_lines(buf: bytes | memoryview, first_line: int) -> list[int]:
    """The numbers of the non-blank lines of ``buf``, which starts at ``first_line``."""
    return [
        n
        for n, line in enumerate(bytes(buf).split(b"\n"), start=first_line)
        if line.strip()
    ]


class RecordReader:
    """Reads complete lines, one JSON record each, into canonical events."""

    #: The format's name.
    format: ClassVar[str]
    #: What one line must hold, completing "each line must be …".
    expected: ClassVar[str]

    def __init__(self, *, source: str, default_trace: str) -> None:
        self._source = source
        self._default = default_trace

    def feed(
        self, buf: bytes | memoryview, first_line: int
    ) -> tuple[list[Event], list[InputError], list[int] | None]:
        """Decode every line of ``buf``; events, errors, and each event's line."""
        events: list[Event] = []
        errors: list[InputError] = []
        lines: list[int] = []
        for n, line in enumerate(bytes(buf).split(b"\n"), start=first_line):
            if not line.strip():
                continue
            try:
                record = _JSON.decode(line)
            except (msgspec.DecodeError, UnicodeDecodeError) as exc:
                errors.append(self.undecodable(line, n, exc))
            else:
                self.record(record, n, events, errors)
            lines.extend([n] * (len(events) - len(lines)))
        return events, errors, lines

    def close(self) -> tuple[list[Event], list[InputError]]:
        """Records are whole lines: nothing is held at the end."""
        return [], []

    def undecodable(self, line: bytes, n: int, exc: Exception) -> InputError:
        """The error for a line that is not JSON (its trace, if named, is tainted)."""
        msg = f"not valid JSON ({exc}); each line must be {self.expected}"
        where = Location(file=self._source, line=n)
        return InputError(msg, location=where, trace_id=sniff_trace_id(line))

    def error(
        self,
        message: str,
        n: int,
        *,
        field: str | None = None,
        trace: str | None = None,
    ) -> InputError:
        """A located error about line ``n``."""
        where = Location(file=self._source, line=n, field=field)
        return InputError(message, location=where, trace_id=trace)

    def record(
        self, record: Any, n: int, events: list[Event], errors: list[InputError]
    ) -> None:
        """Turn one decoded record (from line ``n``) into events."""
        raise NotImplementedError
