"""Find the trace a broken record belongs to, without decoding it."""

from __future__ import annotations

import re
from typing import Final

import msgspec

__all__ = ("sniff_string", "sniff_trace_id")

_TRACE_ID: Final = re.compile(rb'"trace_id"\s*:\s*"((?:[^"\\]|\\.)*)"')


def sniff_trace_id(raw: bytes) -> str | None:
    """The ``trace_id`` a broken or oversize record names, read from its first
    4 KiB, so the loss can be charged to that trace."""
    return _sniffed(_TRACE_ID.search(raw[:4096]))


def sniff_string(raw: bytes, key: str) -> str | None:
    """:func:`sniff_trace_id` for a format whose trace is another key's
    string (OTLP's ``traceId``, agentv's ``test_id``)."""
    pattern = rb'"' + re.escape(key.encode()) + rb'"\s*:\s*"((?:[^"\\]|\\.)*)"'
    return _sniffed(re.search(pattern, raw[:4096]))


def _sniffed(m: re.Match[bytes] | None) -> str | None:
    if m is None:
        return None
    try:
        value = msgspec.json.decode(b'"' + m.group(1) + b'"')
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    return value if isinstance(value, str) and value else None
