"""Whole-document JSON formats, parsed incrementally (ijson's push parser).

ATIF trajectories, Gemini CLI sessions, SWE-agent ``.traj`` files and the like
are one JSON document, often pretty-printed over many lines and sometimes
gigabytes long. A :class:`DocumentReader` pushes the bytes into ijson as they
arrive and builds only the items it is told to (``steps.item``,
``messages.item``, …), one at a time, so memory stays flat in the document's
size and events come out while the document is still being read (as far as
the format allows: a step's events are emitted when the step's object
closes).

Detection cannot rely on the first line of a pretty-printed document, so
:func:`document_shape` looks at a growing prefix (top-level keys, whether it
is an array, the first item's keys) and each document format's
``sniff_document`` decides from that.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any, ClassVar, Final

import ijson
import msgspec

from trajgrade._util.depth import MAX_DEPTH, too_deep_message
from trajgrade.errors import InputError, Location
from trajgrade.formats._doc_faults import fault_line, fault_reason

if TYPE_CHECKING:
    from collections.abc import Iterator

    from trajgrade.events import Event
    from trajgrade.formats._lines import Fed

__all__ = ("DocShape", "DocumentReader", "document_shape")

#: Bytes of a document's start that detection may look at before giving up.
SNIFF_LIMIT: Final = 1 << 20


class DocShape(msgspec.Struct, frozen=True):
    """What a document's first bytes show."""

    is_array: bool
    #: Keys of the top-level object seen so far (empty for an array).
    top_keys: frozenset[str]
    #: Keys of the first element of the top-level array, or of the first
    #: element of the first array-valued top-level key.
    first_item_keys: frozenset[str]
    #: The whole document was in the prefix.
    complete: bool
    #: The prefix stops being JSON somewhere: the shape is what came before
    #: (so the format that recognises it reports the place, located).
    broken: bool = False


def document_shape(prefix: bytes) -> DocShape | None:
    """The shape of a (possibly partial) JSON document; None if it is not JSON."""
    events, complete, broken = _parse_prefix(prefix)
    if not events:
        return None
    is_array = events[0][1] == "start_array"
    top, first = _keys(events, is_array=is_array)
    if broken and not top and not first:
        return None  # nothing to tell a format by: not JSON
    return DocShape(is_array, frozenset(top), frozenset(first), complete, broken)


def _parse_prefix(prefix: bytes) -> tuple[list[tuple[str, str, Any]], bool, bool]:
    """ijson's prefixed events of ``prefix``, as far as it parses; whether
    the document was complete, and whether it broke (not merely stopped)."""
    events = ijson.sendable_list()
    coro = ijson.parse_coro(events, use_float=False)  # (see DocumentReader)
    complete, broken = True, False
    try:
        coro.send(prefix)
        coro.close()
    except ijson.IncompleteJSONError as exc:
        complete = False
        broken = (
            "premature EOF" not in str(exc) and "incomplete" not in str(exc).lower()
        )
    except (ijson.JSONError, UnicodeDecodeError):  # ijson decodes UTF-8 as it goes
        complete, broken = False, True
    return events, complete, broken


def _keys(
    events: list[tuple[str, str, Any]], *, is_array: bool
) -> tuple[set[str], set[str]]:
    """The top-level object's keys, and the first item's: of the top-level
    array, or of the first array-valued top-level key."""
    top: set[str] = set()
    first: set[str] = set()
    item_prefix: str | None = "item" if is_array else None
    for prefix_path, event, value in events:
        if event == "map_key" and prefix_path == "" and not is_array:
            top.add(value)
        elif (
            event == "start_array"
            and item_prefix is None
            and "." not in prefix_path
            and prefix_path
        ):
            item_prefix = f"{prefix_path}.item"
        elif event == "map_key" and prefix_path == item_prefix:
            first.add(value)
        elif event == "end_map" and prefix_path == item_prefix and first:
            item_prefix = "\x00"  # only the first element counts
    return top, first


def _leads(paths: tuple[str, ...]) -> frozenset[str]:
    """Every prefix of a container on the way to one of ``paths`` (ijson
    prefixes, dot-joined): the root is ``""``, ``steps.item`` needs
    ``steps``."""
    out: set[str] = set()
    for path in paths:
        parts = path.split(".")
        out.update(".".join(parts[:k]) for k in range(len(parts)))
    return frozenset(out)


class DocumentReader:
    """Base of document formats: builds the configured items incrementally.

    Subclasses set ``ITEMS`` (ijson prefixes of the objects to build, e.g.
    ``("steps.item",)``) and ``SCALARS`` (top-level scalar prefixes to keep,
    e.g. ``("session_id",)``), and implement :meth:`item`, called with each
    finished object in document order, and optionally :meth:`end`.

    The parser's events (``basic_parse``: no prefixes) move the reader
    between three states; any of them may span chunks, so each keeps its
    place in fields (``_path``; ``_stack``, ``_key``, ``_root``; ``_depth``)::

                       start of a container at an ITEMS prefix
             +--------------------------------------------------+
             |                                                  v
        +---------+  start of a container that leads   +-------------+
        | WALKING |  nowhere (no item or scalar in it)  |  BUILDING   |
        | (_path) |------------------+                 |  (_stack)   |
        +---------+                  |                 +-------------+
           ^   ^                     v                   |        |
           |   |   depth back   +----------+  nested     |        |
           |   +----- to 0 -----| SKIPPING |<-- deeper --+        |
           |                    | (_depth) |  than MAX_DEPTH      |
           |                    +----------+  (reported)          |
           +------------- the item's root closes: item() ---------+

    WALKING follows the containers on the way to an item or a ``SCALARS``
    value (keeping those values), naming each event's prefix as ijson's
    ``parse`` would. BUILDING adds each value to the item's innermost open
    container. SKIPPING counts containers by depth alone. A parse error in
    any state ends the document (``broken``): the events before it are
    drained first, then the error is reported.
    """

    format: ClassVar[str]
    ITEMS: ClassVar[tuple[str, ...]] = ()
    SCALARS: ClassVar[tuple[str, ...]] = ()

    def __init__(self, *, source: str, default_trace: str) -> None:
        self._source = source
        self._default = default_trace
        # basic_parse: ijson builds no prefix string per event; _drain knows
        # the path of the few containers outside items it descends into.
        self._parsed = ijson.sendable_list()
        # Not use_float=True: yajl then parses integers as 64-bit and fails
        # the whole document at a larger one (valid JSON, which every line
        # format reads); numbers with a fraction or exponent come as Decimal
        # and are made floats where items are built (_drain).
        self._coro = ijson.basic_parse_coro(self._parsed, use_float=False)
        #: Open containers outside items: [is_map, prefix, last key].
        self._path: list[list[Any]] = []
        #: Prefixes of the containers that lead to an item or a scalar.
        self._leads = _leads(self.ITEMS + self.SCALARS)
        #: The item being built: its open containers, innermost last (empty:
        #: not building), the last key seen (a value always follows its key,
        #: so one is enough, as in ijson's builder), and its root.
        self._stack: list[Any] = []
        self._key: Any = None
        self._root: Any = None
        self._building: str | None = None
        self._depth = 0
        #: Inside a container nobody wants, or an item nested too deep: its
        #: events are skipped until ``_depth`` is back to 0.
        self._skipping = False
        self._line = 0
        #: The parser has seen a JSON token (not only whitespace).
        self._seen = False
        #: The document was cut short or is not valid JSON: the events before
        #: the break were emitted; the run was not seen to finish.
        self.broken = False
        #: Top-level scalars seen so far (``SCALARS``).
        self.scalars: dict[str, Any] = {}

    # ------------------------------------------------------------ Reader
    def feed(
        self, buf: bytes | memoryview, first_line: int, newlines: int | None = None
    ) -> Fed:
        """Push more of the document; return the events of the items it
        closed. ``newlines``: how many ``buf`` has, when the caller counted
        them already (the pipeline does)."""
        events: list[Event] = []
        errors: list[InputError] = []
        lines: list[int] = []
        if self.broken:
            return events, errors, lines
        if newlines is None:
            newlines = bytes(buf).count(b"\n")
        # Items finished by these bytes are placed at the chunk's last line:
        # the parser does not report positions. (ijson reads the view.)
        # (A last line without its newline yet is a line of these bytes too.)
        open_line = len(buf) > 0 and buf[-1] != 0x0A
        self._line = first_line + (newlines if open_line else max(newlines - 1, 0))
        try:
            self._coro.send(buf)
        except (ijson.JSONError, UnicodeDecodeError) as exc:
            # What parsed before the fault is built first: it may name the
            # document's trace (a session id), which the error then taints;
            # and the error names the fault's line, however the input was cut.
            self.broken = True
            self._line = fault_line(exc, buf, first_line) or self._line
            self._drain(events, errors)
            errors.append(self._broken(exc))
        else:
            self._drain(events, errors)
        lines.extend([self._line] * len(events))
        return events, errors, lines

    def close(self) -> tuple[list[Event], list[InputError]]:
        """The document ended: a truncated one is reported, the rest flushed."""
        events: list[Event] = []
        errors: list[InputError] = []
        if not self.broken:
            try:
                self._coro.close()
            except (ijson.JSONError, UnicodeDecodeError) as exc:
                if not self._seen and not self._parsed:
                    # Only whitespace: no document, as with an empty file
                    # (no error, and no trace of nothing).
                    return events, errors
                self.broken = True
                self._drain(events, errors)
                errors.append(self._broken(exc))
            else:
                self._drain(events, errors)
        self.end(events, errors)
        return events, errors

    # ------------------------------------------------------------ subclass hooks
    def item(
        self, prefix: str, obj: Any, events: list[Event], errors: list[InputError]
    ) -> None:
        """One finished object at one of ``ITEMS``."""
        raise NotImplementedError

    def end(self, events: list[Event], errors: list[InputError]) -> None:
        """The document is over (``broken`` says whether it ended cleanly);
        default: nothing more to say."""

    def error(
        self, message: str, *, field: str | None = None, trace: str | None = None
    ) -> InputError:
        """A located error about the current part of the document."""
        where = Location(file=self._source, line=self._line or None, field=field)
        return InputError(message, location=where, trace_id=trace)

    @property
    def trace_id(self) -> str:
        """The document's trace: the default trace unless a subclass says."""
        return self._default

    def fault_trace(self) -> str | None:
        """The trace to charge with the item being read when it is lost (the
        document breaks there, or it is too deep): :attr:`trace_id` unless a
        subclass knows better (None: no trace can be named for sure)."""
        return self.trace_id

    # ------------------------------------------------------------ internals
    def _broken(self, exc: Exception) -> InputError:
        reason = fault_reason(exc)
        msg = f"the {self.format} document is not valid JSON ({reason}); events before this point were graded"
        return self.error(msg, trace=self.fault_trace())

    def _item(self, obj: Any, events: list[Event], errors: list[InputError]) -> None:
        k = len(events)
        try:
            self.item(self._building or "", obj, events, errors)
        except Exception as exc:  # a reader bug costs one item, not the run
            del events[k:]
            msg = f"this item could not be read ({type(exc).__name__}: {exc}); it was skipped. Please report it: no input should do this"
            errors.append(self.error(msg, trace=self.fault_trace()))

    def _drain(self, events: list[Event], errors: list[InputError]) -> None:
        # The hot path of every document format: the events the parser gave
        # are consumed by the state they arrive in (see the class docstring),
        # each state a loop over the one iterator with its fields in locals;
        # it returns at a transition (True) or when the events run out.
        self._seen = self._seen or bool(self._parsed)
        parsed = iter(self._parsed)
        more = True
        while more:
            if self._skipping:
                more = self._skip(parsed)
            elif self._stack:
                more = self._build(parsed, events, errors)
            else:
                more = self._walk(parsed)
        self._parsed.clear()

    def _skip(self, parsed: Iterator[tuple[str, Any]]) -> bool:
        """SKIPPING: count containers by depth alone until the skipped one
        closes (-> WALKING)."""
        depth = self._depth
        for event, _ in parsed:
            if event == "start_map" or event == "start_array":
                depth += 1
            elif event == "end_map" or event == "end_array":
                depth -= 1
                if depth <= 0:
                    self._depth, self._skipping = depth, False
                    return True
        self._depth = depth
        return False

    def _build(
        self,
        parsed: Iterator[tuple[str, Any]],
        events: list[Event],
        errors: list[InputError],
    ) -> bool:
        """BUILDING: add each value to the item's innermost open container
        (what ijson's ObjectBuilder does, without a method and a closure call
        per value) until the item closes (-> WALKING) or nests too deep
        (-> SKIPPING)."""
        stack = self._stack
        key = self._key
        depth = self._depth
        for event, value in parsed:
            if event == "map_key":
                key = value
            elif event == "start_map" or event == "start_array":
                depth += 1
                if depth > MAX_DEPTH:
                    self._key, self._depth = key, depth
                    self._too_deep(errors)
                    return True
                new: Any = {} if event == "start_map" else []
                top = stack[-1]
                if type(top) is list:
                    top.append(new)
                else:
                    top[key] = new
                stack.append(new)
            elif event == "end_map" or event == "end_array":
                depth -= 1
                stack.pop()
                if not stack:
                    self._key, self._depth = key, depth
                    self._item(self._root, events, errors)
                    self._root = None
                    return True
            else:
                if type(value) is Decimal:
                    value = float(value)  # (1e400 gives inf, as no number)
                top = stack[-1]
                if type(top) is list:
                    top.append(value)
                else:
                    top[key] = value
        self._key, self._depth = key, depth
        return False

    def _too_deep(self, errors: list[InputError]) -> None:
        """BUILDING -> SKIPPING: the item is too deep to walk; it is dropped
        and skipped to its end (charged to the trace it was read for)."""
        trace = self.fault_trace()
        self._stack.clear()
        self._root = None
        self._skipping = True
        errors.append(self.error(too_deep_message(), trace=trace))

    def _walk(self, parsed: Iterator[tuple[str, Any]]) -> bool:
        """WALKING: follow the containers that lead to an item or a scalar,
        naming each event's prefix as ijson's parse would, until an item
        opens (-> BUILDING) or a container nobody wants does (-> SKIPPING)."""
        items = self.ITEMS
        scalars = self.SCALARS
        leads = self._leads
        path = self._path
        for event, value in parsed:
            if event == "map_key":
                path[-1][2] = value
                continue
            if event == "end_map" or event == "end_array":
                path.pop()
                continue
            prefix = _prefix(path)
            if event == "start_map" or event == "start_array":
                if prefix in items:
                    self._root = {} if event == "start_map" else []
                    self._stack.append(self._root)
                    self._building = prefix
                    self._depth = 1
                    return True
                if prefix not in leads:
                    self._skipping = True  # nothing wanted inside: skip it whole
                    self._depth = 1
                    return True
                path.append([event == "start_map", prefix, None])
            elif prefix in scalars:
                self.scalars[prefix] = float(value) if type(value) is Decimal else value
        return False


def _prefix(path: list[list[Any]]) -> str:
    """The ijson prefix of a value in the innermost container of ``path``
    (open containers outside items: [is_map, prefix, last key])."""
    if not path:
        return ""
    is_map, outer, name = path[-1]
    if not is_map:
        name = "item"
    return f"{outer}.{name}" if outer else name
