"""The shared skeleton of formats that hold one JSON record per line.

A subclass says what a line should be (``expected``, for messages) and turns
one decoded record into events (``record``); the line loop, blank lines,
undecodable lines (located, and charged to the trace they name) and the
per-event line numbers live here once.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar, Final

import msgspec

from trajgrade._util.surrogates import without_lone_surrogates
from trajgrade.errors import InputError, Location
from trajgrade.formats._sniff import sniff_trace_id

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import TypeAlias

    from trajgrade.events import Event

    #: What a reader's ``feed`` gives: events, the errors of bad lines, and
    #: each event's line (see :class:`trajgrade.formats.Reader`).
    Fed: TypeAlias = tuple[list[Event], list[InputError], list[int] | None]
    #: Lines decoded already: (start, end, value), ``buf[start:end]`` the line.
    Measured: TypeAlias = Sequence[tuple[int, int, Any]]

__all__ = (
    "DecodedFeed",
    "RecordIndex",
    "RecordReader",
    "decode_line",
    "decode_records",
    "located",
    "nonblank_lines",
    "one_by_one",
    "reader_failed",
    "unreadable",
)

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


def decode_records(
    decoder: msgspec.json.Decoder[Any],
    buf: bytes | memoryview,
    decoded: Measured = (),
    *,
    lines: int | None = None,
) -> list[Any] | None:
    """The records of ``buf``'s non-blank lines, in order (one
    ``decode_lines`` call), or None when a line is not one (the caller reads
    line by line to report it).

    ``decoded`` lists lines that were decoded already, as (start, end,
    value) with ``buf[start:end]`` the line: their values are converted to
    the decoder's type instead of parsing the bytes again, and the lines
    between them are decoded in one call per run. ``lines``: how many lines
    ``buf`` has, when the caller counted them (else they are counted here).
    """
    try:
        if not decoded:
            records: list[Any] = decoder.decode_lines(buf)
        else:
            view = memoryview(buf)
            records = []
            pos = 0
            typed = decoder.type is not Any
            for start, end, value in decoded:
                records += decoder.decode_lines(view[pos:start])
                # A typed decoder reads the line again (such lines are rare):
                # converting the value would read a duplicate key as its last
                # value where decoding checks each, so whether a chunk's
                # lines were measured would change what a record says.
                records.append(decoder.decode(view[start:end]) if typed else value)
                pos = end
            records += decoder.decode_lines(view[pos:])
    except (msgspec.DecodeError, UnicodeDecodeError):  # (ValidationError too)
        return None
    return records if _one_per_line(buf, len(records), lines) else None


def _one_per_line(buf: bytes | memoryview, records: int, lines: int | None) -> bool:
    """Whether ``records`` values can be one per non-blank line of ``buf``.

    ``decode_lines`` reads a stream of whitespace-separated JSON values: two
    objects on one line, or one over two lines, pass it, and would shift
    every later record's line (or run past the last line). When the counts
    differ the caller reads line by line, which rejects such lines, located.
    A buffer with both (a line of two values and a value over two lines,
    cut between tokens) has as many values as lines and is read as values;
    telling would take a pass over every line's ends, for input no agent
    writes.
    """
    if lines is None:
        data = bytes(buf)  # (the same object when ``buf`` is bytes)
        lines = data.count(b"\n") + (bool(data) and not data.endswith(b"\n"))
    if records == lines:
        return True
    # Fewer records than lines: blank lines (rare), or a value over two lines.
    return records < lines and records == sum(
        1 for line in bytes(buf).split(b"\n") if line.strip()
    )


def decode_line(decode: Any, line: bytes) -> Any:
    """``decode(line)``; a line with a lone surrogate escape (what a Node
    agent writes for an unpaired surrogate in a model's text) is read with
    U+FFFD in its place instead of being lost (trajgrade._util.surrogates)."""
    try:
        return decode(line)
    except msgspec.DecodeError:
        fixed = without_lone_surrogates(line)
        if fixed is line:
            raise
        return decode(fixed)


def located(errors: list[InputError], lines: list[int]) -> list[InputError]:
    """A fast path's errors, which carry their record's index among the
    non-blank lines as their line, with that line's number instead."""
    out = []
    for e in errors:
        k = e.location.line
        where = msgspec.structs.replace(
            e.location, line=None if k is None else lines[k]
        )
        out.append(InputError(e.message, location=where, trace_id=e.trace_id))
    return out


def unreadable(source: str, n: int, line: bytes, exc: BaseException) -> InputError:
    """The error for a record whose reading failed unexpectedly (a reader bug
    that hostile input found): that record is skipped, its trace tainted."""
    msg = (
        f"this record could not be read ({type(exc).__name__}: {exc}); it was "
        "skipped. Please report it with the record: no input should do this"
    )
    return InputError(
        msg, location=Location(file=source, line=n), trace_id=sniff_trace_id(line)
    )


def reader_failed(
    source: str,
    n: int,
    line: bytes | None,
    buf: bytes | memoryview,
    exc: BaseException,
    trace: str | None,
) -> InputError:
    """:func:`unreadable` for record ``n`` of ``buf``: its line when given,
    else (a fast path, where ``n`` is the record's index among the non-blank
    lines) found in ``buf``; charged to the trace the line names, else to
    ``trace``."""
    if line is None:
        line = [p for p in bytes(buf).split(b"\n") if p.strip()][n]
    err = unreadable(source, n, line, exc)
    err.trace_id = err.trace_id or trace
    return err


class DecodedFeed(ABC):
    """``feed`` for a :class:`~trajgrade.formats.TakesDecoded` reader: its
    ``feed_decoded`` with no line decoded beforehand."""

    def feed(self, buf: bytes | memoryview, first_line: int) -> Fed:
        return self.feed_decoded(buf, first_line, ())

    @abstractmethod
    def feed_decoded(
        self,
        buf: bytes | memoryview,
        first_line: int,
        decoded: Measured,
        *,
        lines: int | None = None,
    ) -> Fed:
        """Decode every line of ``buf``, taking the values of ``decoded``;
        ``lines``: how many lines ``buf`` has, when the caller counted them."""


def one_by_one(
    reader: Any, source: str, body: bytes | memoryview, first: int, exc: Exception
) -> tuple[list[Event], list[InputError], list[int]]:
    """A reader failed on a batch of lines: retry them one by one, so only
    the lines it fails on are lost (located, their traces tainted). A JSON
    document's parser cannot restart mid-stream: the document is broken."""
    events: list[Event] = []
    errors: list[InputError] = []
    lines: list[int] = []
    if hasattr(reader, "broken"):
        errors.append(unreadable(source, first, b"", exc))
        reader.broken = True
        return events, errors, lines
    for n, line in enumerate(bytes(body).split(b"\n"), start=first):
        if not line.strip():
            continue
        try:
            evs, errs, where = reader.feed(line + b"\n", n)
        except Exception as err:
            errors.append(unreadable(source, n, line, err))
            continue
        events.extend(evs)
        errors.extend(errs)
        # One line was fed: every event it gave is on line n (a RecordIndex
        # would count records of this one-line buffer, not lines).
        lines.extend(
            [n] * len(evs) if where is None or isinstance(where, RecordIndex) else where
        )
    return events, errors, lines


class RecordReader:
    """Reads complete lines, one JSON record each, into canonical events."""

    #: The format's name.
    format: ClassVar[str]
    #: What one line must hold, completing "each line must be …".
    expected: ClassVar[str]

    def __init__(self, *, source: str, default_trace: str) -> None:
        self._source = source
        self._default = default_trace

    def feed(self, buf: bytes | memoryview, first_line: int) -> Fed:
        """Decode every line of ``buf``; events, errors, and each event's line.

        The common case is one ``decode_lines`` call (no per-line split or
        decode call); a line that is not JSON anywhere in ``buf`` sends the
        whole buffer through the line loop, which reports it. decode_lines
        skips blank lines, so on the fast path ``n`` is a record's index
        among the non-blank lines, and line numbers are counted only when an
        error needs one.
        """
        records = decode_records(_JSON, buf)
        if records is None:
            return self._line_by_line(buf, first_line)
        events: list[Event] = []
        errors: list[InputError] = []
        index = RecordIndex()
        for k, record in enumerate(records):
            self._guarded(record, k, None, buf, events, errors)
            index.extend([k] * (len(events) - len(index)))
        if errors:
            errors = located(errors, nonblank_lines(buf, first_line))
        return events, errors, index

    def _line_by_line(
        self, buf: bytes | memoryview, first_line: int
    ) -> tuple[list[Event], list[InputError], list[int]]:
        events: list[Event] = []
        errors: list[InputError] = []
        lines: list[int] = []
        for n, line in enumerate(bytes(buf).split(b"\n"), start=first_line):
            if not line.strip():
                continue
            try:
                record = decode_line(_JSON.decode, line)
            except (msgspec.DecodeError, UnicodeDecodeError) as exc:
                errors.extend(self.rejected(line, n, exc))
            else:
                self._guarded(record, n, line, buf, events, errors)
            lines.extend([n] * (len(events) - len(lines)))
        return events, errors, lines

    def _guarded(
        self,
        record: Any,
        n: int,
        line: bytes | None,
        buf: bytes | memoryview,
        events: list[Event],
        errors: list[InputError],
    ) -> None:
        k = len(events)
        try:
            self.record(record, n, events, errors)
        except Exception as exc:  # a reader bug costs one record, not the run
            del events[k:]
            errors.append(
                reader_failed(self._source, n, line, buf, exc, self.current_trace())
            )

    def current_trace(self) -> str | None:
        """The trace a record that names none belongs to (charged with a
        reader failure on it); None: unknown."""
        return None

    def close(self) -> tuple[list[Event], list[InputError]]:
        """Records are whole lines: nothing is held at the end."""
        return [], []

    def rejected(self, line: bytes, n: int, exc: Exception) -> list[InputError]:
        """The errors for a line that is not JSON: one (:meth:`undecodable`),
        unless the line held records of several traces, each tainted."""
        return [self.undecodable(line, n, exc)]

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
