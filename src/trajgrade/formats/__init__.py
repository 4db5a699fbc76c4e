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

import importlib
import sys
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Final, Protocol, runtime_checkable

import msgspec

from trajgrade._util.lazy import exporter
from trajgrade.errors import InputError, Location
from trajgrade.events import EVENT_TYPES, Event
from trajgrade.formats._lines import decode_line
from trajgrade.formats._sniff import sniff_trace_id

if TYPE_CHECKING:
    from trajgrade.formats._document import SNIFF_LIMIT, DocShape, document_shape
    from trajgrade.formats._lines import Fed, Measured

# The whole-document machinery (and ijson) loads with the first document
# format or document sniff: a canonical JSONL run never needs it.
__getattr__ = exporter(
    __name__,
    dict.fromkeys(
        ("SNIFF_LIMIT", "DocShape", "document_shape"), "trajgrade.formats._document"
    ),
)

__all__ = (
    "BUILTIN",
    "BUILTIN_MODULES",
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
    # SkipsToolResults, SkipsUsageFold, BreaksWhole) and, on the FormatType,
    # SniffsDocuments and ResumesMidFile; each says what is assumed without it.


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


def _is_document_reader(kind: type) -> bool:
    """``issubclass(kind, DocumentReader)``, without importing it: until
    a document format's module loaded it, no reader class can be one."""
    document = sys.modules.get("trajgrade.formats._document")
    return document is not None and issubclass(kind, document.DocumentReader)


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
            _is_document_reader(kind),
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
#: Each format's name -> the module (under trajgrade.formats) that defines it,
#: in that order: a format's module is imported when it is first asked for.
BUILTIN_MODULES: Final[Mapping[str, str]] = {
    "claude-code": "claude_code",
    "codex": "codex",
    "gemini-cli-jsonl": "gemini_jsonl",
    "gemini-stream-json": "gemini_stream",
    "otel": "otel",
    "vally": "vally",
    "agentv": "agentv",
    "letta": "letta",
    "openresponses": "openresponses",
    "openai-chat": "openai_chat",
    "openai-chat-json": "openai_chat",
    # whole-document formats (detected by their shape, see detect_document)
    "atif": "atif",
    "gemini-cli": "gemini_cli",
    "swe-agent": "swe_agent",
    "mini-swe-agent": "mini_swe_agent",
    "openhands": "openhands",
    "trajgrade": "native",
}


class _Builtin(Mapping[str, "FormatType"]):
    """The built-in formats by name, in detection order; a format's module
    is imported when the format is first looked up (names, ``in`` and
    ``len`` import nothing)."""

    __slots__ = ("_loaded",)

    def __init__(self) -> None:
        self._loaded: dict[str, FormatType] = {}

    def __getitem__(self, name: str) -> FormatType:
        found = self._loaded.get(name)
        if found is None:
            module = importlib.import_module(f"{__name__}.{BUILTIN_MODULES[name]}")
            for fmt in module.FORMATS:
                self._loaded[fmt.name] = fmt
            found = self._loaded[name]
        return found

    def __contains__(self, name: object) -> bool:
        return name in BUILTIN_MODULES

    def __iter__(self) -> Iterator[str]:
        return iter(BUILTIN_MODULES)

    def __len__(self) -> int:
        return len(BUILTIN_MODULES)


BUILTIN: Final[Mapping[str, FormatType]] = _Builtin()

#: Every key of a canonical event (its fields as JSON names, and ``type``).
_EVENT_KEYS: Final = frozenset(
    {"type"}
    | {
        field.encode_name
        for cls in EVENT_TYPES.values()
        for field in msgspec.structs.fields(cls)
    }
)

_sniffer: Final = msgspec.json.Decoder()


def detect(first_line: bytes) -> str | None:
    """The name of the format whose first record ``first_line`` looks like."""
    try:
        # (A lone surrogate escape is read as the line readers read it.)
        record = decode_line(_sniffer.decode, first_line)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return None  # (RecursionError: nested too deep for msgspec)
    if _is_plain_event(record):
        return "trajgrade"
    for fmt in BUILTIN.values():
        try:
            if fmt.sniff(record):
                return fmt.name
        except (TypeError, ValueError):
            continue  # an odd first record (e.g. a list as `type`) is not this format
    return None


def _is_plain_event(record: object) -> bool:
    """A canonical event with no key beyond the event model's: no earlier
    format's sniff claims one (each needs a key of its own, a ``type`` no
    canonical event has, or no ``type``), so the other formats' modules need
    not load to be asked (tests/formats/test_detect_plain.py checks it)."""
    if not isinstance(record, dict):
        return False
    kind = record.get("type")
    return (
        isinstance(kind, str) and kind in EVENT_TYPES and record.keys() <= _EVENT_KEYS
    )


def detect_document(prefix: bytes, *, final: bool) -> tuple[str | None, bool]:
    """The document format whose shape ``prefix`` shows, and whether that
    answer is final (a longer prefix cannot change it).

    ``final`` says the prefix is all there is.
    """
    from trajgrade.formats._document import document_shape

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
    from trajgrade.formats._document import document_shape

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
