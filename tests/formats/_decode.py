"""Helpers shared by the format tests: read a fixture, decode it through the
public pipeline (detection included), whole or in chunks."""

from __future__ import annotations

import gzip
from typing import TYPE_CHECKING, Any

from trajgrade.formats import BUILTIN
from trajgrade.formats._lines import RecordIndex, nonblank_lines
from trajgrade.pipeline.decoder import SourceDecoder

if TYPE_CHECKING:
    from pathlib import Path

    from trajgrade.errors import InputError
    from trajgrade.events import Event

#: The whole-document formats (read as one JSON value, not line by line),
#: sorted: what the pipeline calls a document (``sniff_document``).
DOCUMENTS: tuple[str, ...] = tuple(
    sorted(name for name in BUILTIN if hasattr(BUILTIN[name], "sniff_document"))
)


def raw(path: Path) -> bytes:
    """A fixture's bytes (gzipped fixtures are decompressed)."""
    data = path.read_bytes()
    return gzip.decompress(data) if path.name.endswith(".gz") else data


def decode(
    data: bytes, *, fmt: str, source: str = "input", chunks: list[int] | None = None
) -> tuple[list[Event], list[InputError]]:
    """Decode ``data`` (fed in ``chunks`` sizes, then the rest); the format
    detected must be ``fmt``."""
    dec = SourceDecoder(source)
    events: list[Event] = []
    errors: list[InputError] = []
    pos = 0
    for size in [*(chunks or []), len(data)]:
        batch = dec.feed(data[pos : pos + size])
        events += batch.events
        errors += batch.errors
        pos += size
    end = dec.close()
    assert dec.format == fmt
    return events + end.events, errors + end.errors


def of(events: list[Event], kind: type[Any]) -> list[Any]:
    """The events of one type."""
    return [e for e in events if isinstance(e, kind)]


def feed_lines(
    reader: Any, buf: bytes, first: int = 1
) -> tuple[list[Event], list[InputError], list[int] | None]:
    """``reader.feed(buf, first)`` with each event's line as a line number
    (a reader's fast path gives record indexes, counted on demand)."""
    events, errors, where = reader.feed(buf, first)
    if isinstance(where, RecordIndex):
        nonblank = nonblank_lines(buf, first)
        where = [nonblank[k] for k in where]
    return events, errors, where
