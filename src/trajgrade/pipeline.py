"""From bytes to verdicts, without I/O: line framing, format detection, feeding.

:class:`SourceDecoder` is one input source's byte stream: it frames lines
across chunk boundaries (a partial last line is held until it completes),
enforces the line-length limit, detects the format from the first non-blank
line, and runs that format's reader. :class:`Grading` wires decoders to one
:class:`~trajgrade.engine.Engine` and collects what a runner needs to report:
verdicts, located input errors and anomalies.

The async runner (``runner.py``) only reads chunks and writes results; batch
grading is the same calls with the whole input at once (:func:`grade_bytes`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

import msgspec

from trajgrade.engine import Anomaly, Engine
from trajgrade.errors import InputError, Location
from trajgrade.events import Event
from trajgrade.formats import Reader, detect, open_reader
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
_TRACE_ID: Final = re.compile(rb'"trace_id"\s*:\s*"((?:[^"\\]|\\.)*)"')


class Batch(msgspec.Struct, kw_only=True):
    """Events and errors decoded from one chunk."""

    events: list[Event]
    errors: list[InputError]
    #: 1-based line number of each event when it is known exactly (else empty).
    first_line: int = 0
    exact_lines: bool = False


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
        self._skipping = False
        self._skip_line = 0
        self._line = 1  # number of the next line to start
        self._reader: Reader | None = None
        #: Bytes consumed so far (complete lines handed to the reader, plus
        #: skipped oversize lines); a resume position.
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
                return Batch(events=[], errors=[])
            self.offset += cut + 1
            chunk = chunk[cut + 1 :]
            self._skipping = False
            self._line += 1
        data = self._tail + chunk if self._tail else chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            self._tail = data
            if len(data) > self._max:
                errors.append(self._oversize(data))
                self.offset += len(data)
                self._tail = b""
                self._skipping = True
            return Batch(events=[], errors=errors)
        body, self._tail = data[: cut + 1], data[cut + 1 :]
        if len(self._tail) > self._max:
            errors.append(
                self._oversize(self._tail, line=self._line + body.count(b"\n"))
            )
            self.offset += len(self._tail)
            self._tail = b""
            self._skipping = True
        batch = self._decode(body, errors)
        return batch

    def close(self) -> Batch:
        """End of the source: a final line without newline is still a line."""
        errors: list[InputError] = []
        events: list[Event] = []
        first = self._line
        if self._tail and not self._skipping:
            tail, self._tail = self._tail, b""
            b = self._decode(tail + b"\n", errors)
            events, errors, first = b.events, b.errors, b.first_line
            self.offset -= 1  # the newline was ours, not the file's
        if self._reader is not None:
            more, errs = self._reader.close()
            events.extend(more)
            errors.extend(errs)
        return Batch(events=events, errors=errors, first_line=first)

    def _decode(self, body: bytes, errors: list[InputError]) -> Batch:
        first = self._line
        n_lines = body.count(b"\n")
        self._line += n_lines
        self.offset += len(body)
        if len(body) > self._max:
            body = self._drop_long_lines(body, first, errors)
        if self._reader is None:
            reader = self._start_reader(body, first, errors)
            if reader is None:
                return Batch(events=[], errors=errors, first_line=first)
        events, errs = self._reader.feed(body, first)  # type: ignore[union-attr]
        errors.extend(errs)
        return Batch(
            events=events,
            errors=errors,
            first_line=first,
            exact_lines=len(events) == n_lines,
        )

    def _start_reader(
        self, body: bytes, first: int, errors: list[InputError]
    ) -> Reader | None:
        fmt = self._fmt
        if fmt == "auto":
            for n, line in enumerate(body.split(b"\n"), start=first):
                if not line.strip():
                    continue
                found = detect(line)
                if found is None:
                    head = line[:80].decode("utf-8", "replace")
                    msg = (
                        f"cannot tell the log format from its first record ({head!r}); "
                        "pass --format (see `trajgrade formats`)"
                    )
                    errors.append(
                        InputError(msg, location=Location(file=self.source, line=n))
                    )
                    # Keep trying: the next line may be readable.
                    continue
                fmt = found
                break
            else:
                return None
        self._reader = open_reader(fmt, source=self.source, default_trace=self._default)
        return self._reader

    def _drop_long_lines(
        self, body: bytes, first: int, errors: list[InputError]
    ) -> bytes:
        kept = []
        for n, line in enumerate(body.split(b"\n"), start=first):
            if len(line) > self._max:
                errors.append(self._oversize(line, line=n))
                kept.append(b"")
            else:
                kept.append(line)
        return b"\n".join(kept)

    def _oversize(self, head: bytes, *, line: int | None = None) -> InputError:
        n = line if line is not None else self._line
        m = _TRACE_ID.search(head[:4096])
        trace = m.group(1).decode("utf-8", "replace") if m else None
        msg = (
            f"line is longer than the {self._max:,}-byte limit and was skipped; "
            "raise --max-line-bytes if such records are expected"
        )
        return InputError(
            msg, location=Location(file=self.source, line=n), trace_id=trace
        )


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
        out: list[Verdict] = []
        for err in batch.errors:
            self.errors.append(err)
            if err.trace_id is not None:
                engine.reject(err.trace_id, str(err))
        feed = engine.feed
        anomalies = engine.anomalies
        for i, ev in enumerate(batch.events):
            verdicts = feed(ev, now=now)
            if verdicts:
                out.extend(verdicts)
            if anomalies:
                line = batch.first_line + i if batch.exact_lines else None
                where = Location(file=decoder.source, line=line)
                self.anomalies.extend((a, where) for a in anomalies)
                anomalies.clear()
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
