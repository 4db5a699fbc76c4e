"""Glob patterns for ``--watch DIR --glob PATTERN``, matched on relative paths.

``pathlib`` in Python 3.11 cannot *match* a path against a recursive pattern
(``PurePath.match`` treats ``**`` like ``*`` and matches from the right), and
globbing the whole tree again on every change would cost a walk per event. So
the pattern is compiled once into a regular expression over ``/``-separated
relative paths, with shell semantics: ``*`` and ``?`` stay within one path
segment, ``[...]`` is a character class, and a ``**`` segment spans zero or
more directories. The compiled pattern also says how deep a directory can
still lead to a match, so the watcher does not descend where nothing can match.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ("Glob",)

_UNLIMITED: Final = 1 << 30


class Glob:
    """A compiled glob pattern over relative paths (``a/b/c.jsonl``)."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        segments = [s for s in pattern.strip("/").split("/") if s]
        parts: list[str] = []
        for i, seg in enumerate(segments):
            last = i == len(segments) - 1
            if seg == "**":
                parts.append(".*" if last else "(?:[^/]+/)*")
            else:
                parts.append(_segment(seg) + ("" if last else "/"))
        self._regex = re.compile("".join(parts) + r"\Z", re.DOTALL)
        #: How many directory levels below the root can hold a match.
        self.max_depth = _UNLIMITED if "**" in segments else max(len(segments) - 1, 0)

    def match(self, relative: str) -> bool:
        """Whether ``relative`` (``/``-separated, no leading ``/``) matches."""
        return self._regex.match(relative) is not None

    def __repr__(self) -> str:
        return f"Glob({self.pattern!r})"


def _segment(seg: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(seg):
        c = seg[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and (close := seg.find("]", i + 2)) != -1:
            body = seg[i + 1 : close]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = close
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)
