"""A shell word as a glob: what it can name, after quote removal.

:func:`glob_words` reads a command node's words the way the guard must:
quotes removed (``.e''nv``, ``'.'env``, ``$'\\x2eenv'`` are ``.env``), brace
expansion done (``{.e,x}nv`` is ``.env`` and ``xnv``), ``$HOME`` and ``~``
the home marker ``~``, and whatever cannot be known (``$X``, ``$(...)``,
backticks) a ``*``, so that the word is a *pattern* that names every path
the shell could make of it. A word with an unquoted ``*``, ``?`` or ``[``
is a pattern too. Conservative by design: a pattern that could name a
protected path is judged as if it did.
"""

from __future__ import annotations

import codecs
import re
from typing import Any, Final, NamedTuple

from trajgrade.graders.matching._shell_words import word_nodes

__all__ = ("GlobWord", "expand_braces", "glob_word", "glob_words")

_GLOB_CHARS: Final = re.compile(r"(?<!\\)[*?\[]")
_BRACES: Final = re.compile(r"\{([^{}]*,[^{}]*)\}")
#: At most this many words from one brace expansion (``{a,b}{c,d}...``).
MAX_BRACE_WORDS: Final = 64


class GlobWord(NamedTuple):
    text: str
    #: The word names whatever ``text`` matches as a glob (not one name).
    pattern: bool


def expand_braces(text: str) -> list[str]:
    """Bash's brace expansion of an unquoted word (lists only, bounded)."""
    out = [text]
    for _ in range(8):
        grown: list[str] = []
        changed = False
        for word in out:
            m = _BRACES.search(word)
            if m is None:
                grown.append(word)
                continue
            changed = True
            head, tail = word[: m.start()], word[m.end() :]
            grown.extend(head + alt + tail for alt in m.group(1).split(","))
        out = grown[:MAX_BRACE_WORDS]
        if not changed:
            break
    return out


def glob_words(command: Any) -> list[list[GlobWord]]:
    """Each word of a command node as the globs it can be (one, or several
    after brace expansion)."""
    return [glob_word(node) for node in word_nodes(command)]


def glob_word(node: Any) -> list[GlobWord]:
    text, pattern = _read(node)
    raw = node.text.decode("utf-8", "replace")
    if (
        node.type in ("word", "concatenation")
        and "{" in raw
        and "," in raw
        and not re.search(r"['\"$`]", raw)
    ):
        return [
            GlobWord(_unescape(w), pattern or bool(_GLOB_CHARS.search(w)))
            for w in expand_braces(raw)
        ]
    return [GlobWord(text, pattern)]


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def _read(node: Any) -> tuple[str, bool]:
    """(text, pattern) of one word node."""
    kind = node.type
    text: str = node.text.decode("utf-8", "replace")
    if kind in ("word", "number"):
        if text.startswith("~"):
            text = "~" + text[1:] if text[1:2] in ("", "/") else "*" + text[1:]
        return _unescape(text), bool(_GLOB_CHARS.search(text))
    if kind == "raw_string":
        return text[1:-1], False
    if kind == "ansi_c_string":
        try:
            return codecs.decode(text[2:-1], "unicode_escape"), False
        except (UnicodeDecodeError, ValueError):
            return "*", True
    if kind == "string":
        parts: list[str] = []
        pattern = False
        for child in node.named_children:
            if child.type == "string_content":
                parts.append(child.text.decode("utf-8", "replace"))
            else:
                piece, _ = _read(child)
                parts.append(piece)
                pattern |= piece != "~"
        return "".join(parts), pattern
    if kind in ("simple_expansion", "expansion"):
        name = text.strip("${}")
        if name == "HOME":
            return "~", False
        return "*", True
    if kind == "concatenation":
        pieces = [_read(c) for c in node.named_children]
        return "".join(p for p, _ in pieces), any(q for _, q in pieces)
    return "*", True  # $( ), backticks, arithmetic, process substitution
