"""Formats: upstream log shapes in, canonical events out (sans-IO).

A *reader* is created per input source. The source hands it complete lines
(bytes, newline-terminated, with the 1-based number of the first line); the
reader returns canonical events plus the :class:`~trajgrade.errors.InputError`
of every line it could not use. Readers keep whatever small state their format
needs (call ids, the current trace); they never do I/O.

:func:`open_reader` picks the format from the first readable line unless the
user named one (`trajgrade formats` lists them; each module's docstring says
what it reads and how it maps to canonical events). One module per format:
``native`` (trajgrade's canonical JSONL), ``vally``, ``agentv``, ``letta``,
``openresponses`` (OpenAI Responses items, AI GO! traces), and the agents' own
logs as they are added.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Protocol, runtime_checkable

import msgspec

from trajgrade.errors import InputError, Location
from trajgrade.events import EVENT_TYPES, Event
from trajgrade.formats import (
    agentv,
    atif,
    claude_code,
    codex,
    gemini_cli,
    gemini_jsonl,
    gemini_stream,
    letta,
    mini_swe_agent,
    native,
    openai_chat,
    openhands,
    openresponses,
    otel,
    swe_agent,
    vally,
)
from trajgrade.formats._document import (
    SNIFF_LIMIT,
    DocShape,
    DocumentReader,
    document_shape,
)
from trajgrade.formats._lines import decode_line
from trajgrade.formats._sniff import sniff_trace_id

if TYPE_CHECKING:
    from collections.abc import Mapping

    from trajgrade.formats._lines import Fed, Measured

__all__ = (
    "BUILTIN",
    "EVENT_TAGS",
    "SNIFF_LIMIT",
    "BreaksWhole",
    "DocShape",
    "FlushesTrace",
    "FormatType",
    "Reader",
    "ResumesMidFile",
    "SkipsToolResults",
    "SkipsUsageFold",
    "SniffsDocuments",
    "TakesDecoded",
    "detect",
    "detect_document",
    "document_shape",
    "flushes_trace",
    "is_json_object",
    "open_reader",
    "reader_traits",
    "sniff_trace_id",
    "starts_document",
)


class Reader(Protocol):
    """Per-source incremental decoder."""

    #: The format's name.
    format: str

    def feed(self, buf: bytes | memoryview, first_line: int) -> Fed:
        """Decode complete lines; return their events, the errors of bad lines,
        and each event's line number (None when events are exactly the
        non-blank lines in order, so the caller can derive them if needed; a
        :class:`RecordIndex` when each event's place among the non-blank
        lines is known but its line number was not counted)."""
        ...

    def close(self) -> tuple[list[Event], list[InputError]]:
        """The source ended: flush whatever the format still holds."""
        ...

    # Optional: the reader Protocols below (FlushesTrace, TakesDecoded,
    # SkipsToolResults, SkipsUsageFold, BreaksWhole) and, on the FormatType, SniffsDocuments
    # and ResumesMidFile; each says what is assumed without it.


@runtime_checkable
class FlushesTrace(Protocol):
    """A reader that holds events of one trace waiting for more input (a
    response's usage until the response ends).

    Default (absent): the reader holds nothing per trace; closing one trace
    (an idle timeout) flushes nothing from it."""

    def flush_trace(self, trace_id: str) -> list[Event]:
        """What the reader holds for ``trace_id``, given up now because the
        runner is about to close that trace."""
        ...


#: Reader classes -> (SkipsToolResults, TakesDecoded, a whole document's,
#: SkipsUsageFold): a host opens a reader per record (trajgrade.api.trace_host).
_TRAITS: dict[type, tuple[bool, bool, bool, bool]] = {}


def reader_traits(reader: object) -> tuple[bool, bool, bool, bool]:
    """Whether ``reader`` is a :class:`SkipsToolResults`, a
    :class:`TakesDecoded`, a whole document's, and a
    :class:`SkipsUsageFold` (asked once per class)."""
    kind = type(reader)
    known = _TRAITS.get(kind)
    if known is None:
        known = _TRAITS[kind] = (
            issubclass(kind, SkipsToolResults),
            issubclass(kind, TakesDecoded),
            issubclass(kind, DocumentReader),
            issubclass(kind, SkipsUsageFold),
        )
    return known


#: Reader classes -> whether they are :class:`FlushesTrace`: an isinstance
#: of a runtime Protocol costs about 10 µs, and a runner closing 100 k idle
#: traces asks for each of them.
_FLUSHES: dict[type, bool] = {}


def flushes_trace(reader: object) -> bool:
    """Whether ``reader`` is a :class:`FlushesTrace` (asked once per class)."""
    kind = type(reader)
    known = _FLUSHES.get(kind)
    if known is None:
        known = _FLUSHES[kind] = issubclass(kind, FlushesTrace)
    return known


@runtime_checkable
class BreaksWhole(Protocol):
    """A reader of one JSON document, whose parser cannot restart mid-stream.

    ``broken``: set once a batch made the reader fail; the document is then
    unreadable (one error), and the reader stops producing events.

    Default (absent): a batch the reader failed on is retried line by line,
    so only the bad lines are lost (trajgrade.formats._lines.one_by_one)."""

    broken: bool


@runtime_checkable
class TakesDecoded(Protocol):
    """A reader that can take lines already decoded: the nesting bound
    decodes a line with many brackets to measure it (trajgrade._util.depth), and
    such a reader uses that value instead of parsing the line again."""

    def feed_decoded(
        self,
        buf: bytes | memoryview,
        first_line: int,
        decoded: Measured,
        *,
        lines: int | None = None,
    ) -> Fed:
        """``feed``, where ``buf[start:end]`` of each (start, end, value) is
        one line whose JSON is ``value`` (in order), and ``lines`` (when
        given) is how many lines ``buf`` has; the result must be what
        ``feed(buf, first_line)`` gives."""
        ...


@runtime_checkable
class SkipsToolResults(Protocol):
    """A reader that can leave ``ToolResult.result`` unbuilt when no grader
    reads it (trajgrade.events)."""

    def skip_tool_results(self) -> None: ...


@runtime_checkable
class SkipsUsageFold(Protocol):
    """A reader that can decode ``usage`` events as
    :class:`~trajgrade.events.LeanUsage` when no grader routes them.

    Default (absent): usage events are :class:`~trajgrade.events.Usage`."""

    def skip_usage_fold(self) -> None: ...


@runtime_checkable
class SniffsDocuments(Protocol):
    """A whole-document format (``atif``, ``gemini-cli``, …), detected from
    the shape of a JSON document rather than from its first line.

    Default (absent): a line format; a JSON document that goes on past its
    first line is not this format, and naming it does not make a deep or long
    line part of a document."""

    def sniff_document(self, shape: DocShape) -> bool:
        """Whether a document of this ``shape`` is this format."""
        ...


@runtime_checkable
class ResumesMidFile(Protocol):
    """A format whose records decode alone, so a source can resume at any
    line boundary (``native``).

    ``stateless``: True.

    Default (absent, or False): a source resumed from a checkpoint is
    replayed from its start, the events before the resume point dropped."""

    stateless: bool


class FormatType(Protocol):
    """A registered format (optionally also :class:`SniffsDocuments` and
    :class:`ResumesMidFile`)."""

    name: str
    summary: str

    def sniff(self, record: object) -> bool:
        """Whether a decoded first record looks like this format."""
        ...

    def reader(self, *, source: str, default_trace: str) -> Reader:
        """A fresh reader for one input source."""
        ...


#: Detection order: the first format whose ``sniff`` accepts the first record
#: wins, so more specific shapes come first: agents' own logs (a Claude Code
#: ``progress`` line also has a ``data`` object, like a vally event), then the
#: graders' shapes, then canonical events (which never carry ``data``).
_MODULES: Final = (
    claude_code,
    codex,
    gemini_jsonl,
    gemini_stream,
    otel,
    vally,
    agentv,
    letta,
    openresponses,
    openai_chat,
    # whole-document formats (detected by their shape, see detect_document)
    atif,
    gemini_cli,
    swe_agent,
    mini_swe_agent,
    openhands,
    native,
)

BUILTIN: Final[Mapping[str, FormatType]] = {
    f.name: f for module in _MODULES for f in module.FORMATS
}

_sniffer: Final = msgspec.json.Decoder()


def detect(first_line: bytes) -> str | None:
    """The name of the format whose first record ``first_line`` looks like."""
    try:
        # (A lone surrogate escape is read as the line readers read it.)
        record = decode_line(_sniffer.decode, first_line)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return None  # (RecursionError: nested too deep for msgspec)
    for fmt in BUILTIN.values():
        try:
            if fmt.sniff(record):
                return fmt.name
        except (TypeError, ValueError):
            continue  # an odd first record (e.g. a list as `type`) is not this format
    return None


def detect_document(prefix: bytes, *, final: bool) -> tuple[str | None, bool]:
    """The document format whose shape ``prefix`` shows, and whether that
    answer is final (a longer prefix cannot change it).

    ``final`` says the prefix is all there is.
    """
    shape = document_shape(prefix)
    if shape is None:
        return None, True  # not JSON at all
    for fmt in BUILTIN.values():
        sniff = getattr(fmt, "sniff_document", None)
        if sniff is not None and sniff(shape):
            return fmt.name, True
    return None, final or shape.complete or shape.broken


def is_json_object(line: bytes) -> bool:
    """Whether ``line`` is one JSON object (not a record any format read)."""
    try:
        return isinstance(_sniffer.decode(line), dict)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return False  # (nested too deep for msgspec: not one we can read)


def starts_document(line: bytes) -> bool:
    """Whether a line no line format claims opens a JSON document: valid JSON
    that goes on past the line, or a whole document a document format knows.
    A broken line of a JSONL file is neither, and stays a line error."""
    if line.lstrip()[:1] not in (b"{", b"["):
        return False
    shape = document_shape(line)
    if shape is None:
        return False
    return not shape.complete or detect_document(line, final=True)[0] is not None


def open_reader(fmt: str, *, source: str, default_trace: str) -> Reader:
    """A reader of the named format for one source."""
    try:
        ftype = BUILTIN[fmt]
    except KeyError:
        known = ", ".join(sorted(BUILTIN))
        msg = f"unknown input format {fmt!r}; known formats: {known} (or 'auto')"
        raise InputError(msg, location=Location(file=source)) from None
    return ftype.reader(source=source, default_trace=default_trace)


#: Every canonical event tag, for error messages.
EVENT_TAGS: Final = tuple(EVENT_TYPES)
