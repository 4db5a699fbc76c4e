"""Field helpers shared by the whole-document agent formats (ATIF, Gemini CLI)."""

from __future__ import annotations

from typing import Any, Final

import msgspec

from trajgrade._util.depth import decode_bounded
from trajgrade.formats._fields import BadField
from trajgrade.formats._fields import count as _count

__all__ = ("count", "parse_args", "text_of")

_JSON: Final = msgspec.json.Decoder()


def text_of(value: Any) -> str:
    """Text of a message or result ``content``: a string, or the ``text``
    of its content parts (ATIF v1.6+, Gemini CLI 2026 user messages)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(
            p["text"]
            for p in value
            if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


def parse_args(raw: Any) -> tuple[dict[str, Any] | None, str | None]:
    """``(args, args_raw)`` of tool arguments: an object as is, a JSON
    string parsed once and kept as written."""
    if isinstance(raw, dict):
        return raw, None
    if isinstance(raw, str):
        try:
            parsed = decode_bounded(_JSON, raw)
        except (msgspec.DecodeError, UnicodeDecodeError):
            return None, raw
        return (parsed if isinstance(parsed, dict) else None), raw
    return None, None


def count(metrics: dict[str, Any], key: str, bad: list[str]) -> int:
    """A non-negative integer token count; 0 when absent. A value of the
    wrong type counts 0 and its key is added to ``bad``."""
    try:
        return _count(metrics, key)
    except BadField:
        bad.append(key)
        return 0
