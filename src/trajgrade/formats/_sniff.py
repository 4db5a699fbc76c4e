"""Find the trace a broken record belongs to, without decoding it."""

from __future__ import annotations

import re
from typing import Final

import msgspec

__all__ = ("sniff_trace_id",)

_TRACE_ID: Final = re.compile(rb'"trace_id"\s*:\s*"((?:[^"\\]|\\.)*)"')


def sniff_trace_id(raw: bytes) -> str | None:
    """The ``trace_id`` a broken or oversize record names, read from its first
    4 KiB, so the loss can be charged to that trace."""
    m = _TRACE_ID.search(raw[:4096])
    if m is None:
        return None
    try:
        value = msgspec.json.decode(b'"' + m.group(1) + b'"')
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    return value if isinstance(value, str) and value else None
