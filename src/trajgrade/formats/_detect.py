"""Which format a source is in, told from its first readable line or from
the growing prefix of the JSON document it opens.

A :class:`FormatDetector` is one source's detection (``fmt="auto"``). It is
given the source's complete lines until it chooses, and reports the lines
it cannot tell a format by (located, charged to a trace). Its states, and
the lines that move it between them::

                  blank line, or a line no format claims (reported)
                  +-----+
                  |     v
              +---------+  a line a line format claims (detect)  +--------+
              |  LINES  |--------------------------------------->| CHOSEN |
              +---------+                                        +--------+
                   |  a line that opens a JSON document              ^
                   |  (starts_document): kept as a prefix            |
                   v                                                 |
              +---------+  the prefix shows a document format's      |
         +--->| PREFIX  |  shape (detect_document) ------------------+
         |    +---------+
         |      |   |  the shape is decided and no format knows it,
         +------+   |  or the prefix outgrew SNIFF_LIMIT: its first
      more lines    |  line is reported, once
      (undecided)   v
              +----------+
              | GAVE_UP  |  the rest of that document is not read
              +----------+

The source's end (:meth:`FormatDetector.close`) decides a PREFIX as it
stands: CHOSEN or GAVE_UP. CHOSEN hands the caller the format's name and
the input from its first line on (:class:`Detected`); opening the reader
is the caller's.
"""

from __future__ import annotations

from typing import NamedTuple

from trajgrade.errors import InputError, Location
from trajgrade.formats import (
    detect,
    detect_document,
    is_json_object,
    sniff_trace_id,
    starts_document,
)

__all__ = ("Detected", "FormatDetector")


class Detected(NamedTuple):
    """A format chosen, and the input it is to read from its first line on."""

    fmt: str
    #: From the chosen format's first line on: the lines given (a line
    #: format), or the whole document prefix collected (``prefix``).
    body: bytes
    #: The number of ``body``'s first line.
    line: int
    #: ``body`` is a document prefix (its lines need no line checks).
    prefix: bool


class FormatDetector:
    """One source's format detection (see the module docstring)."""

    __slots__ = ("_default_trace", "_doc", "_doc_line", "_fix", "_source", "gave_up")

    def __init__(self, source: str, *, default_trace: str, fix: str) -> None:
        self._source = source
        self._default_trace = default_trace
        #: How to fix an undetectable format, as the caller spells it.
        self._fix = fix
        #: PREFIX: the start of a JSON document whose format is not known yet.
        self._doc: bytearray | None = None
        self._doc_line = 0
        #: GAVE_UP: an unrecognised document, reported once, not per line.
        self.gave_up = False

    def feed(
        self, body: bytes, first: int, errors: list[InputError]
    ) -> Detected | None:
        """The next complete lines ``body`` (the first numbered ``first``):
        the format they show, or None while it is not known (the lines no
        format claims are reported in ``errors``)."""
        if self._doc is not None:
            self._doc += body
            return self._try_document(errors, final=False)
        start, n = 0, first
        while start < len(body):
            end = body.find(b"\n", start)
            end = len(body) if end < 0 else end
            line = body[start:end]
            if line.strip():
                found = detect(line)
                if found is not None:
                    return Detected(found, body[start:], n, prefix=False)
                if starts_document(line):
                    self._doc, self._doc_line = bytearray(body[start:]), n
                    return self._try_document(errors, final=False)
                self._undetectable(line, n, errors)
            start, n = end + 1, n + 1
        return None

    def close(self, errors: list[InputError]) -> Detected | None:
        """The source ended: a document prefix is decided as it stands."""
        if self._doc is None:
            return None
        return self._try_document(errors, final=True)

    def drop(self) -> None:
        """Reading stopped: a document prefix is not a record, only unread."""
        self._doc = None

    def _try_document(
        self, errors: list[InputError], *, final: bool
    ) -> Detected | None:
        """PREFIX: a document format's name once the prefix shows its shape;
        GAVE_UP once no format can know it."""
        from trajgrade.formats._document import SNIFF_LIMIT  # (documents only)

        assert self._doc is not None
        name, decided = detect_document(bytes(self._doc), final=final)
        if name is not None:
            data, line = bytes(self._doc), self._doc_line
            self._doc = None
            return Detected(name, data, line, prefix=True)
        # (Told once line 1, the record reported, is whole: how the bytes
        # arrive must change neither the message nor the trace charged.)
        end = self._doc.find(b"\n")
        whole = end >= 0 or final or len(self._doc) > SNIFF_LIMIT
        if whole and (decided or len(self._doc) > SNIFF_LIMIT):
            first = self._doc[: end if end >= 0 else len(self._doc)]
            self._undetectable(bytes(first[:4096]), self._doc_line, errors)
            self._doc = None
            # The rest of that document must not be re-detected line by line.
            self.gave_up = True
        return None

    def _undetectable(self, line: bytes, n: int, errors: list[InputError]) -> None:
        head = line[:80].decode("utf-8", "replace")
        msg = f"cannot tell the log format from this record ({head!r}); {self._fix}"
        where = Location(file=self._source, line=n)
        trace = sniff_trace_id(line)
        if trace is None and is_json_object(line):
            # A JSON record that names no trace belongs to the source's own
            # trace, as in every line format: losing it taints that trace.
            # (A line that is not JSON at all may be a header: no trace.)
            trace = self._default_trace
        errors.append(InputError(msg, location=where, trace_id=trace))
