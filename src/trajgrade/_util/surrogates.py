"""Lone surrogate escapes in JSON text, read as U+FFFD.

JavaScript strings are UTF-16, and ``JSON.stringify`` writes an unpaired
surrogate as an escape (``"\\ud800"``). Node-based agents (Claude Code,
Gemini CLI) therefore write such escapes into their logs and hook payloads
whenever a model's text holds one; msgspec refuses them, Python's ``json``
accepts them. trajgrade reads them as U+FFFD, the character the agent hands
a tool or a file for them, rather than losing the record: only after a
decode failed, so clean input pays nothing.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ("without_lone_surrogates",)

#: A surrogate pair, a lone surrogate, or any other escape (consumed whole,
#: so an escaped backslash before ``u`` is never read as an escape).
_ESCAPES: Final = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
    rb"|\\u[dD][89a-fA-F][0-9a-fA-F]{2}"
    rb"|\\.",
    re.DOTALL,
)


def _replace_lone(m: re.Match[bytes]) -> bytes:
    escape = m.group()
    return rb"\ufffd" if len(escape) == 6 and escape[2] in b"dD" else escape


def without_lone_surrogates(raw: bytes) -> bytes:
    """``raw`` with every unpaired surrogate escape replaced by ``\\ufffd``
    (the same object when there is none)."""
    if b"\\u" not in raw:
        return raw
    fixed = _ESCAPES.sub(_replace_lone, raw)
    return raw if fixed == raw else fixed
