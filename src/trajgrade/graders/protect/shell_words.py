"""A shell word as a glob: what it can name, after quote removal.

:func:`glob_words` reads a command node's words the way the guard must:
quotes removed (``.e''nv``, ``'.'env``, ``$'\\x2eenv'`` are ``.env``), brace
expansion done (``{.e,x}nv`` is ``.env`` and ``xnv``, ``.e{m..o}v`` is
``.emv .env .eov``, quoted parts included: ``{'.e',x}nv``), ``$HOME`` and
``~`` the home marker ``~``, ``$PWD`` the working directory (``.``),
``~user`` any home (``/**``), and whatever cannot be known (``$X``,
``$(...)``, backticks) a ``*`` -- at the start of a word ``/**/*``, since
it may expand to an absolute directory (``$(pwd)/.env``, ``$D/id_rsa``) --
so that the word is a *pattern* that names every path the shell could make
of it. A word with an unquoted ``*``, ``?``
or ``[`` is a pattern too. Conservative by design: a pattern that could
name a protected path is judged as if it did.

Internally a word is first written as a glob source in which quoted text is
escaped (``'*'`` is ``\\*``), so that braces, commas and glob characters
count only where the shell would count them.
"""

from __future__ import annotations

import codecs
import re
from typing import Any, Final, NamedTuple

from trajgrade.graders.matching._shell_words import word_nodes

__all__ = ("GlobWord", "expand_braces", "glob_word", "glob_words")

#: Unescaped glob characters of a glob source.
_GLOB_CHARS: Final = re.compile(r"(?<!\\)(?:\\\\)*[*?\[]")
_SPECIAL: Final = re.compile(r"([*?\[\]{},\\~])")
_SEQUENCE: Final = re.compile(r"^(-?\d+|[A-Za-z])\.\.(-?\d+|[A-Za-z])$")
#: What a word that starts with an unknowable expansion can be: any path,
#: absolute ones included (``$(pwd)/.env`` is not under the cwd's ``*``).
_UNKNOWN_HEAD: Final = "/**/*"
#: At most this many words from one brace expansion (``{a,b}{c,d}...``).
MAX_BRACE_WORDS: Final = 64


class GlobWord(NamedTuple):
    #: A literal path when ``pattern`` is False; else a glob (``\\x``: x).
    text: str
    #: The word names whatever ``text`` matches as a glob (not one name).
    pattern: bool


def glob_words(command: Any) -> list[list[GlobWord]]:
    """Each word of a command node as the globs it can be (one, or several
    after brace expansion)."""
    return [glob_word(node) for node in word_nodes(command)]


def glob_word(node: Any) -> list[GlobWord]:
    source = _source(node, first=True)
    out = []
    for alt in expand_braces(source):
        if _GLOB_CHARS.search(alt):
            out.append(GlobWord(alt, True))
        elif alt.startswith("\\~"):
            # A quoted ~ is a name, not the home marker.
            out.append(GlobWord("./" + _unescape(alt), False))
        else:
            out.append(GlobWord(_unescape(alt), False))
    return out


def expand_braces(source: str) -> list[str]:
    """Bash's brace expansion of a glob source (lists and sequences;
    bounded): escaped braces and commas are text."""
    out = [source]
    for _ in range(8):
        grown: list[str] = []
        changed = False
        for word in out:
            found = _brace(word)
            if found is None:
                grown.append(word)
                continue
            changed = True
            start, end, alts = found
            grown.extend(word[:start] + alt + word[end:] for alt in alts)
        out = grown[:MAX_BRACE_WORDS]
        if not changed:
            break
    return out


def _brace(word: str) -> tuple[int, int, list[str]] | None:
    """The first innermost unescaped ``{...}`` that expands: (start, end,
    alternatives)."""
    opened = -1
    i = 0
    while i < len(word):
        c = word[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            opened = i
        elif c == "}" and opened >= 0:
            inner = word[opened + 1 : i]
            alts = _alternatives(inner)
            if alts is not None:
                return opened, i + 1, alts
            opened = -1
        i += 1
    return None


def _alternatives(inner: str) -> list[str] | None:
    parts: list[str] = []
    piece = ""
    i = 0
    while i < len(inner):
        if inner[i] == "\\":
            piece += inner[i : i + 2]
            i += 2
            continue
        if inner[i] == ",":
            parts.append(piece)
            piece = ""
        else:
            piece += inner[i]
        i += 1
    if parts:
        return [*parts, piece]
    m = _SEQUENCE.match(inner)
    if m is None:
        return None
    a, b = m.group(1), m.group(2)
    if a.lstrip("-").isdigit() and b.lstrip("-").isdigit():
        lo, hi = int(a), int(b)
        step = 1 if hi >= lo else -1
        return [str(n) for n in range(lo, hi + step, step)][:MAX_BRACE_WORDS]
    if a.isalpha() and b.isalpha():
        step = 1 if ord(b) >= ord(a) else -1
        return [chr(n) for n in range(ord(a), ord(b) + step, step)]
    return None


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def _quoted(text: str) -> str:
    """Quoted text as glob source: every special character literal."""
    return _SPECIAL.sub(r"\\\1", text)


def _source(node: Any, *, first: bool) -> str:
    """The glob source of one word node (see the module docstring)."""
    kind = node.type
    text: str = node.text.decode("utf-8", "replace")
    if kind in ("word", "number"):
        if first and text.startswith("~"):
            head, slash, tail = text.partition("/")
            # ~ and ~/x: the home marker; ~user/x: some user's home.
            return ("~" if head == "~" else "/**") + slash + tail
        return text
    if kind == "raw_string":
        return _quoted(text[1:-1])
    if kind == "ansi_c_string":
        try:
            return _quoted(codecs.decode(text[2:-1], "unicode_escape"))
        except (UnicodeDecodeError, ValueError):
            return "*"
    if kind == "string":
        parts: list[str] = []
        for i, child in enumerate(node.named_children):
            if child.type == "string_content":
                parts.append(_quoted(child.text.decode("utf-8", "replace")))
            else:
                parts.append(_source(child, first=first and i == 0))
        return "".join(parts)
    if kind in ("simple_expansion", "expansion"):
        return _variable(text.strip("${}"), first=first)
    if kind == "concatenation":
        return "".join(
            _source(c, first=first and i == 0)
            for i, c in enumerate(node.named_children)
        )
    # $( ), backticks, arithmetic, process substitution
    return _UNKNOWN_HEAD if first else "*"


def _variable(name: str, *, first: bool) -> str:
    if first and name == "HOME":
        return "~"
    if first and name == "PWD":
        return "."
    return _UNKNOWN_HEAD if first else "*"
