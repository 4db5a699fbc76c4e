"""Sources: where bytes come from. A source yields chunks in order and knows
its name (for messages) and its default trace id (for logs that carry none).
Framing, format detection and decoding happen in ``trajgrade.pipeline.decoder``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trajgrade.sources.pieces import Closed, Data, FileId, Opened, Piece
from trajgrade.sources.stream import CHUNK_BYTES, StreamSource, open_source

if TYPE_CHECKING:
    from trajgrade.sources.live import LiveFiles

__all__ = (
    "CHUNK_BYTES",
    "Closed",
    "Data",
    "FileId",
    "LiveFiles",
    "Opened",
    "Piece",
    "StreamSource",
    "open_source",
)


def __getattr__(name: str) -> Any:
    # LiveFiles (--follow, --watch) imports anyio: a batch run never needs it.
    if name == "LiveFiles":
        from trajgrade.sources.live import LiveFiles

        return LiveFiles
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)
