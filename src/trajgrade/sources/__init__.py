"""Sources: where bytes come from. A source yields chunks in order and knows
its name (for messages) and its default trace id (for logs that carry none).
Framing, format detection and decoding happen in ``trajgrade.pipeline.decoder``."""

from __future__ import annotations

from trajgrade.sources.live import LiveFiles
from trajgrade.sources.pieces import Closed, Data, FileId, Opened, Piece
from trajgrade.sources.stream import CHUNK_BYTES, StreamSource, open_source

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
