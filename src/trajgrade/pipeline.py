"""From bytes to verdicts, without I/O: line framing, format detection, feeding.

:class:`SourceDecoder` is one input source's byte stream: it frames lines
across chunk boundaries (a partial last line is held until it completes),
enforces the line-length limit without holding an oversize line in memory,
detects the format from the first readable line, and runs that format's
reader. :class:`Grading` wires decoders to one
:class:`~trajgrade.engine.Engine` and collects what a runner needs to report:
verdicts, located input errors and anomalies.

The async runner (``runner.py``) only reads chunks and writes results; batch
grading is the same calls with the whole input at once (:func:`grade_bytes`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import msgspec

from trajgrade.engine import Anomaly, Engine
from trajgrade.errors import InputError, Location
from trajgrade.events import Event
from trajgrade.formats import Reader, detect, open_reader, sniff_trace_id
from trajgrade.verdicts import Verdict

if TYPE_CHECKING:
    from collections.abc import Iterable

    from trajgrade.config import Suite

__all__ = (
    "DEFAULT_MAX_LINE_BYTES",
    "Batch",
    "GradeResult",
    "Grading",
    "SourceDecoder",
    "grade_bytes",
)

#: Longest accepted line. Large enough for a 10 MB tool output in one event.
DEFAULT_MAX_LINE_BYTES: Final = 32 * 1024 * 1024


class Batch(msgspec.Struct, kw_only=True):
    """Events and errors decoded from one run of complete lines."""

    events: list[Event]
    errors: list[InputError]
    #: 1-based number of the first line of ``body``.
    first_line: int = 0
    #: The line of each event, when the reader knew it (else derived lazily).
    lines: list[int] | None = None
    #: The decoded bytes, kept only to derive line numbers when needed.
    body: bytes = b""

    def line_of(self, index: int) -> int | None:
        """The 1-based line of ``events[index]``.

        Readers that map one line to one event leave ``lines`` unset on their
        fast path; the mapping (the non-blank lines, in order) is computed
        only here, when a message needs it.
        """
        if self.lines is None:
            self.lines = [
                n
                for n, line in enumerate(self.body.split(b"\n"), start=self.first_line)
                if line.strip()
            ]
        return self.lines[index] if 0 <= index < len(self.lines) else None


class SourceDecoder:
    """Framing + detection + format reader for one input source."""

    def __init__(
        self,
        source: str,
        *,
        fmt: str = "auto",
        default_trace: str | None = None,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    ) -> None:
        self.source = source
        self._fmt = fmt
        self._default = default_trace if default_trace is not None else source
        self._max = max_line_bytes
        self._tail = b""
        #: Inside an oversize line: drop bytes until its newline.
        self._skipping = False
        self._line = 1  # number of the next line to start
        self._reader: Reader | None = None
        #: Bytes consumed so far (complete lines handed to the reader, plus
        #: skipped oversize lines): a resume position.
        self.offset = 0

    @property
    def format(self) -> str | None:
        """The detected (or given) format, once known."""
        return self._reader.format if self._reader is not None else None

    def feed(self, chunk: bytes) -> Batch:
        """Take the next bytes of the source."""
        errors: list[InputError] = []
        if self._skipping:
            cut = chunk.find(b"\n")
            if cut < 0:
                self.offset += len(chunk)
                return Batch(events=[], errors=[], first_line=self._line)
            self.offset += cut + 1
            chunk = chunk[cut + 1 :]
            self._skipping = False
            self._line += 1
        data = self._tail + chunk if self._tail else chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            self._tail = data
            if len(data) > self._max:
                self._skip(data, self._line, errors)
            return Batch(events=[], errors=errors, first_line=self._line)
        body, self._tail = data[: cut + 1], data[cut + 1 :]
        if len(self._tail) > self._max:
            self._skip(self._tail, self._line + body.count(b"\n"), errors)
        return self._decode(body, errors)

    def close(self) -> Batch:
        """End of the source: a final line without newline is still a line."""
        batch = Batch(events=[], errors=[], first_line=self._line)
        if self._tail and not self._skipping:
            tail, self._tail = self._tail, b""
            batch = self._decode(tail + b"\n", [])
            self.offset -= 1  # that newline was ours, not the source's
        if self._reader is not None:
            more, errs = self._reader.close()
            if more:
                known = [batch.line_of(i) or 0 for i in range(len(batch.events))]
                batch.lines = known + [max(self._line - 1, 1)] * len(more)
                batch.events.extend(more)
            batch.errors.extend(errs)
        return batch

    def _skip(self, head: bytes, line: int, errors: list[InputError]) -> None:
        msg = (
            f"line is longer than the {self._max:,}-byte limit and was skipped; "
            "raise --max-line-bytes if such records are expected"
        )
        where = Location(file=self.source, line=line)
        errors.append(InputError(msg, location=where, trace_id=sniff_trace_id(head)))
        self.offset += len(head)
        self._tail = b""
        self._skipping = True

    def _decode(self, body: bytes, errors: list[InputError]) -> Batch:
        first = self._line
        self._line += body.count(b"\n")
        self.offset += len(body)
        if len(body) > self._max:
            body = self._drop_long_lines(body, first, errors)
        if self._reader is None:
            body, first = self._start_reader(body, first, errors)
            if self._reader is None:
                return Batch(events=[], errors=errors, first_line=first)
        events, errs, lines = self._reader.feed(body, first)
        errors.extend(errs)
        return Batch(
            events=events, errors=errors, first_line=first, lines=lines, body=body
        )

    def _start_reader(
        self, body: bytes, first: int, errors: list[InputError]
    ) -> tuple[bytes, int]:
        """Detect the format; return ``body`` from the first readable line on,
        and that line's number (lines before it were reported here)."""
        fmt = self._fmt
        start, n = 0, first
        while fmt == "auto" and start < len(body):
            end = body.find(b"\n", start)
            end = len(body) if end < 0 else end
            line = body[start:end]
            if line.strip():
                found = detect(line)
                if found is not None:
                    fmt = found
                    break
                head = line[:80].decode("utf-8", "replace")
                msg = (
                    f"cannot tell the log format from this record ({head!r}); "
                    "pass --format (see `trajgrade formats`)"
                )
                where = Location(file=self.source, line=n)
                errors.append(
                    InputError(msg, location=where, trace_id=sniff_trace_id(line))
                )
            start, n = end + 1, n + 1
        if fmt == "auto":
            return b"", n
        self._reader = open_reader(fmt, source=self.source, default_trace=self._default)
        return body[start:], n

    def _drop_long_lines(
        self, body: bytes, first: int, errors: list[InputError]
    ) -> bytes:
        kept = []
        for n, line in enumerate(body.split(b"\n"), start=first):
            if len(line) > self._max:
                before = self.offset
                self._skip(line, n, errors)
                # _skip's bookkeeping is for streamed lines; this one is whole.
                self.offset, self._skipping = before, False
                kept.append(b"")
            else:
                kept.append(line)
        return b"\n".join(kept)


class GradeResult(msgspec.Struct, kw_only=True):
    """Everything a batch run produced."""

    verdicts: list[Verdict]
    errors: list[InputError]
    anomalies: list[tuple[Anomaly, Location]]


class Grading:
    """Feeds decoded batches into one engine; reports what happened."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.errors: list[InputError] = []
        self.anomalies: list[tuple[Anomaly, Location]] = []

    def feed(
        self, decoder: SourceDecoder, batch: Batch, *, now: float | None = None
    ) -> list[Verdict]:
        """Feed one batch; bad records taint their traces; return verdicts."""
        engine = self.engine
        for err in batch.errors:
            self.errors.append(err)
            if err.trace_id is not None:
                engine.reject(err.trace_id, str(err))
        out = engine.feed_many(batch.events, now=now) if batch.events else []
        if engine.anomalies:
            for a in engine.anomalies:
                where = Location(file=decoder.source, line=batch.line_of(a.index))
                self.anomalies.append((a, where))
            engine.anomalies.clear()
        return out


def grade_bytes(
    suite: Suite,
    data: bytes | Iterable[bytes],
    *,
    source: str = "<input>",
    fmt: str = "auto",
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> GradeResult:
    """Batch: grade a whole input (bytes, or chunks of it) and finish every trace."""
    engine = Engine(suite)
    grading = Grading(engine)
    decoder = SourceDecoder(source, fmt=fmt, max_line_bytes=max_line_bytes)
    verdicts: list[Verdict] = []
    for chunk in [data] if isinstance(data, bytes) else data:
        verdicts.extend(grading.feed(decoder, decoder.feed(chunk)))
    verdicts.extend(grading.feed(decoder, decoder.close()))
    verdicts.extend(engine.finish())
    return GradeResult(
        verdicts=verdicts, errors=grading.errors, anomalies=grading.anomalies
    )
