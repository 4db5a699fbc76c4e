"""From bytes to verdicts, without I/O: line framing, format detection, feeding.

:class:`SourceDecoder` is one input source's byte stream: it frames lines
across chunk boundaries (a partial last line is held until it completes),
enforces the line-length limit without holding an oversize line in memory,
detects the format from the first readable line, and runs that format's
reader. :class:`~trajgrade.pipeline.grading.Grading` (re-exported here) wires
decoders to one :class:`~trajgrade.engine.engine.Engine` and collects what a runner
needs to report: verdicts, located input errors and anomalies.

The async runner (``runner.py``) only reads chunks and writes results; batch
grading is the same calls with the whole input at once (:func:`grade_bytes`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, cast

from trajgrade._util.depth import scan, too_deep_message
from trajgrade.errors import InputError, Location
from trajgrade.formats import (
    BUILTIN,
    SNIFF_LIMIT,
    Reader,
    SkipsToolResults,
    TakesDecoded,
    detect,
    detect_document,
    is_json_object,
    open_reader,
    sniff_trace_id,
    starts_document,
)
from trajgrade.formats._document import DocumentReader
from trajgrade.formats._lines import one_by_one
from trajgrade.pipeline.batches import Batch, Segment, segment

if TYPE_CHECKING:
    from trajgrade.events import Event

__all__ = ("API_FIXES", "DEFAULT_MAX_LINE_BYTES", "SourceDecoder")

#: Longest accepted line. Large enough for a 10 MB tool output in one event.
DEFAULT_MAX_LINE_BYTES: Final = 32 * 1024 * 1024
_BOM: Final = b"\xef\xbb\xbf"


_CLI_FIXES: Final = (
    "pass --format (see `trajgrade formats`)",
    "raise --max-line-bytes",
)
#: The same fixes for StreamGrader's callers.
API_FIXES: Final = (
    "give StreamGrader its fmt= (the names: `trajgrade formats`)",
    "raise StreamGrader's max_line_bytes=",
)


class SourceDecoder:
    """Framing + detection + format reader for one input source."""

    def __init__(
        self,
        source: str,
        *,
        fmt: str = "auto",
        default_trace: str | None = None,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        tool_results: bool = True,
        fixes: tuple[str, str] = _CLI_FIXES,
    ) -> None:
        self.source = source
        self._fmt = fmt
        #: A document format was named: a deep or long line is part of it.
        self._named_document = hasattr(BUILTIN.get(fmt), "sniff_document")
        self._is_document = False
        #: A document's last byte so far was not a newline: its line is open.
        self._open_line = False
        #: How to fix an undetectable format and an oversize line, as the
        #: caller spells its options (CLI flags, or StreamGrader's).
        self._fixes = fixes
        #: False: no grader reads ToolResult.result (trajgrade.events).
        self._tool_results = tool_results
        #: Trace of events that carry no trace_id.
        self.default_trace = default_trace if default_trace is not None else source
        self._max = max_line_bytes
        self._tail = b""
        #: Inside an oversize line: drop bytes until its newline.
        self._skipping = False
        self._line = 1  # number of the next line to start
        self._reader: Reader | None = None
        self._takes_decoded = False
        #: The start of a JSON document whose format is not known yet.
        self._doc: bytearray | None = None
        self._doc_line = 0
        #: Bytes consumed so far (complete lines handed to the reader, plus
        #: skipped oversize lines): a resume position.
        self.offset = 0

    @property
    def format(self) -> str | None:
        """The detected (or given) format, once known."""
        return self._reader.format if self._reader is not None else None

    @property
    def document(self) -> bool:
        """The source is one JSON document (read incrementally), not lines."""
        return self._is_document

    @property
    def line(self) -> int:
        """Number of the next line to start."""
        return self._line

    @staticmethod
    def can_resume_at(fmt: str | None) -> bool:
        """Whether a source of format ``fmt`` can start mid-file at a line
        boundary (its records decode alone); others are replayed from the
        start with their events dropped."""
        return fmt is not None and bool(getattr(BUILTIN.get(fmt), "stateless", False))

    def resume_at(self, offset: int, line: int, fmt: str) -> None:
        """Start at ``offset``/``line`` of the source, in format ``fmt``
        (see :meth:`can_resume_at`); only before the first ``feed``."""
        self._reader = self._open(fmt)
        self.offset = offset
        self._line = line

    def feed(self, chunk: bytes) -> Batch:
        """Take the next bytes of the source.

        The complete lines are decoded straight from ``chunk`` (a memoryview,
        no copy); only a line cut by the chunk boundary is joined up.
        """
        batch = Batch(events=[], errors=[])
        start = 0
        if self.offset == 0 and len(self._tail) < len(_BOM):
            # A UTF-8 byte order mark is not part of line 1, also when it
            # arrives in pieces.
            head = self._tail + chunk
            if len(head) < len(_BOM) and _BOM.startswith(head):
                self._tail = head  # still arriving
                return batch
            if head.startswith(_BOM):
                chunk, self._tail = head, b""
                start = self.offset = len(_BOM)
        if self._is_document or (self._reader is None and self._named_document):
            # A document is parsed as its bytes come, however long its lines
            # (a minified one is one line): no framing, no line limit.
            if self._tail:
                self._decode(self._tail + chunk[start:], batch)
            elif start < len(chunk):
                self._decode(memoryview(chunk)[start:], batch, chunk, start)
            if len(chunk) > start or self._tail:
                last = chunk if len(chunk) > start else self._tail
                self._open_line = not last.endswith(b"\n")
            self._tail = b""
            return batch
        if self._skipping:
            nl = chunk.find(b"\n")
            if nl < 0:
                self.offset += len(chunk)
                return batch
            self.offset += nl + 1
            start = nl + 1
            self._skipping = False
            self._line += 1
        if self._tail:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                self._tail += chunk[start:]
                if len(self._tail) > self._max:
                    self._skip(self._tail, self._line, batch.errors)
                return batch
            head, self._tail = self._tail + chunk[start : nl + 1], b""
            start = nl + 1
            self._decode(head, batch)
        cut = chunk.rfind(b"\n", start)
        if cut >= start:
            self._decode(memoryview(chunk)[start : cut + 1], batch, chunk, start)
            start = cut + 1
        self._tail = chunk[start:]
        if len(self._tail) > self._max:
            self._skip(self._tail, self._line, batch.errors)
        return batch

    def flush_trace(self, trace_id: str) -> Batch:
        """What the reader holds for ``trace_id`` (usage waiting for its
        response to end, say), as if that trace's input had ended; the source
        itself goes on. For a runner about to close an idle trace."""
        flush = getattr(self._reader, "flush_trace", None)
        events: list[Event] = flush(trace_id) if flush is not None else []
        batch = Batch(events=events, errors=[])
        if events:
            line = max(self._line - 1, 1)
            batch.segments.append(
                Segment(len(events), line, lines=[line] * len(events))
            )
        return batch

    def stop(self) -> Batch:
        """Reading stopped before the source ended (a signal, --fail-fast): a
        partial last line or an unfinished document is not a broken record,
        only an unread one; what the reader holds is flushed as at the end."""
        self._tail = b""
        self._doc = None
        if self.document:
            return Batch(events=[], errors=[])
        return self.close()

    def close(self) -> Batch:
        """End of the source: a final line without newline is still a line."""
        batch = Batch(events=[], errors=[])
        if self._tail and not self._skipping:
            tail, self._tail = self._tail, b""
            self._decode(tail + b"\n", batch)
            self.offset -= 1  # that newline was ours, not the source's
        if self._doc is not None:
            # A short document ends before its shape was certain: decide now.
            data, line = self._try_document(batch.errors, final=True)
            if self._reader is not None:
                events, errs, lines = self._reader.feed(data, line)
                batch.errors.extend(errs)
                if events:
                    batch.segments.append(segment(len(events), line, data, lines))
                    batch.events.extend(events)
        if self._reader is not None:
            more, errs = self._reader.close()
            if more:
                line = self._line if self._open_line else max(self._line - 1, 1)
                batch.segments.append(
                    Segment(len(more), line, lines=[line] * len(more))
                )
                batch.events.extend(more)
            batch.errors.extend(errs)
        return batch

    def _skip(self, head: bytes, line: int, errors: list[InputError]) -> None:
        msg = (
            f"line is longer than the {self._max:,}-byte limit and was skipped; "
            f"{self._fixes[1]} if such records are expected"
        )
        where = Location(file=self.source, line=line)
        errors.append(InputError(msg, location=where, trace_id=sniff_trace_id(head)))
        self.offset += len(head)
        self._tail = b""
        self._skipping = True

    def _decode(
        self,
        body: bytes | memoryview,
        batch: Batch,
        chunk: bytes | None = None,
        start: int = 0,
    ) -> None:
        """Decode the complete lines ``body`` (``chunk[start:]`` up to its
        last newline, when given) into ``batch``."""
        first, errors = self._line, batch.errors
        deep: list[int] = []
        #: Lines the depth bound decoded: (start, end, value) in ``body``.
        measured: list[tuple[int, int, Any]] = []
        document = self.document or (self._reader is None and self._named_document)
        if document:
            # (Counted in place: a document chunk is not copied here.)
            n_lines = (
                chunk.count(b"\n", start)
                if chunk is not None
                else bytes(body).count(b"\n")
            )
        elif chunk is None:
            n_lines, deep, found = scan(bytes(body))
            measured = [(s, e, v) for _, s, e, v in found]
        else:
            # One pass over the whole chunk (no copy of the view) counts the
            # lines and finds those nested too deep; the cut-off lines on
            # either side are another call's.
            n_all, deep, found = scan(chunk)
            before = chunk.count(b"\n", 0, start)
            n_lines = n_all - before
            deep = [i - before for i in deep if before <= i < n_all]
            measured = [
                (s - start, e - start, v) for i, s, e, v in found if before <= i < n_all
            ]
        self._line += n_lines
        self.offset += len(body)
        #: How many lines ``body`` has, for the reader (None once it is cut).
        counted: int | None = n_lines
        if self._reader is None:
            # Detection sees the lines as they are: a document's deep or long
            # line is part of it; a line format's is dropped once known.
            if self._fmt == "none":
                return  # an unrecognised document: reported once, not per line
            body, first = self._start_reader(bytes(body), first, errors, deep)
            measured = []  # (lines before the first readable one are cut)
            counted = None
            if self._reader is None:
                return
        elif deep or len(body) > self._max:
            body = self._drop_bad_lines(body, deep, first, errors)
            measured = []  # (offsets into the body as it was)
        try:
            if document:
                events, errs, lines = self._reader.feed(body, first, n_lines)  # type: ignore[call-arg]
            elif self._takes_decoded:
                # The reader takes the measured lines' values instead of
                # parsing the same bytes a second time, and the line count.
                taker = cast("TakesDecoded", self._reader)
                events, errs, lines = taker.feed_decoded(
                    body, first, measured, lines=counted
                )
            else:
                events, errs, lines = self._reader.feed(body, first)
        except Exception as exc:  # a reader bug must cost its records, not the run
            events, errs, lines = one_by_one(
                self._reader, self.source, body, first, exc
            )
        errors.extend(errs)
        if events:
            batch.segments.append(segment(len(events), first, body, lines))
            if batch.events:
                batch.events.extend(events)
            else:
                batch.events = events

    def _start_reader(
        self, body: bytes, first: int, errors: list[InputError], deep: list[int]
    ) -> tuple[bytes, int]:
        """Detect the format; return ``body`` from the first readable line on,
        and that line's number (lines before it were reported here).

        A line that starts a JSON document but is not a whole record (a
        pretty-printed ATIF file, say) starts a document prefix, collected
        until a document format recognises its shape.
        """
        if self._doc is not None:
            self._doc += body
            return self._try_document(errors, final=False)
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
                if starts_document(line):
                    self._doc, self._doc_line = bytearray(body[start:]), n
                    return self._try_document(errors, final=False)
                self._undetectable(line, n, errors)
            start, n = end + 1, n + 1
        if fmt == "auto":
            return b"", n
        self._reader = self._open(fmt)
        if self._is_document:
            return body[start:], n
        # Lines: their deep and long ones (``deep``: indexes from ``first``) go.
        deep = [i - (n - first) for i in deep if i >= n - first]
        return bytes(self._drop_bad_lines(body[start:], deep, n, errors)), n

    def _open(self, fmt: str) -> Reader:
        reader = open_reader(fmt, source=self.source, default_trace=self.default_trace)
        if not self._tool_results and isinstance(reader, SkipsToolResults):
            reader.skip_tool_results()
        # (Asked once: a runtime protocol check costs microseconds a chunk.)
        self._takes_decoded = isinstance(reader, TakesDecoded)
        self._is_document = isinstance(reader, DocumentReader)
        return reader

    def _try_document(
        self, errors: list[InputError], *, final: bool
    ) -> tuple[bytes, int]:
        assert self._doc is not None
        name, decided = detect_document(bytes(self._doc), final=final)
        if name is not None:
            data, line = bytes(self._doc), self._doc_line
            self._doc = None
            self._reader = self._open(name)
            return data, line
        # (Told once line 1, the record reported, is whole: how the bytes
        # arrive must change neither the message nor the trace charged.)
        end = self._doc.find(b"\n")
        whole = end >= 0 or final or len(self._doc) > SNIFF_LIMIT
        if whole and (decided or len(self._doc) > SNIFF_LIMIT):
            first = self._doc[: end if end >= 0 else len(self._doc)]
            self._undetectable(bytes(first[:4096]), self._doc_line, errors)
            self._doc = None
            # The rest of that document must not be re-detected line by line.
            self._fmt = "none"
        return b"", self._doc_line

    def _undetectable(self, line: bytes, n: int, errors: list[InputError]) -> None:
        head = line[:80].decode("utf-8", "replace")
        msg = (
            f"cannot tell the log format from this record ({head!r}); {self._fixes[0]}"
        )
        where = Location(file=self.source, line=n)
        trace = sniff_trace_id(line)
        if trace is None and is_json_object(line):
            # A JSON record that names no trace belongs to the source's own
            # trace, as in every line format: losing it taints that trace.
            # (A line that is not JSON at all may be a header: no trace.)
            trace = self.default_trace
        errors.append(InputError(msg, location=where, trace_id=trace))

    def _drop_bad_lines(
        self,
        body: bytes | memoryview,
        deep: list[int],
        first: int,
        errors: list[InputError],
    ) -> bytes | memoryview:
        """``body`` with its lines over the length limit, then its ``deep``
        ones (nested too deep to walk, see _depth; indexes from its first
        line, ``first``), blanked out and reported."""
        if len(body) <= self._max and not deep:
            return body
        lines = bytes(body).split(b"\n")
        for i, line in enumerate(lines):
            if len(line) > self._max:
                before = self.offset
                self._skip(line, first + i, errors)
                # _skip's bookkeeping is for streamed lines; this one is whole.
                self.offset, self._skipping = before, False
                lines[i] = b""
        for i in deep:
            where = Location(file=self.source, line=first + i)
            trace = sniff_trace_id(lines[i]) or self.default_trace
            errors.append(
                InputError(too_deep_message(), location=where, trace_id=trace)
            )
            lines[i] = b""
        return b"\n".join(lines)
