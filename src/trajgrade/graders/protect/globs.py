"""Path globs as automata: does a path match a glob, and can two globs name
a common path?

The language is the one the ``protect:`` section and the analysis's pattern
touches share: ``*`` any run of characters within a name, ``?`` one
character, ``[...]`` a class (``!`` or ``^`` negates; ranges; POSIX classes
such as ``[:alpha:]``), ``\\x`` the character ``x``, and ``**`` as a whole
name: any number of names, none included (``a/**/b`` matches ``a/b``,
``a/**`` matches ``a`` and everything under it, a leading ``**/`` any
directory). A ``/`` is matched only by a ``/`` or by ``**``. ``*`` and
``?`` match a leading dot, as under bash's ``dotglob``: a guard must assume
the agent's shell could set it.

A glob compiles to a nondeterministic automaton whose edges carry character
*sets* (sorted code point intervals), so that two globs intersect when the
product of their automata reaches a pair of final states: a breadth-first
walk over state pairs, with edges whose sets intersect.
"""

from __future__ import annotations

from typing import Final

__all__ = ("Glob", "escape", "has_magic")

_MAX: Final = 0x10FFFF
Ranges = tuple[tuple[int, int], ...]
_ANY: Final[Ranges] = ((0, _MAX),)
_SLASH: Final[Ranges] = ((47, 47),)
_NOT_SLASH: Final[Ranges] = ((0, 46), (48, _MAX))
#: A product walk that visits more pairs than this answers "yes": a guard
#: errs toward a match rather than spending unbounded time.
PAIRS_MAX: Final = 200_000
#: Cached transitions and answers per glob, each (cleared when full).
_DFA_MAX: Final = 4096
_MAGIC: Final = frozenset("*?[\\")


def has_magic(text: str) -> bool:
    """Whether ``text`` holds a glob character."""
    return any(c in _MAGIC for c in text)


def escape(text: str) -> str:
    """``text`` as a glob naming exactly it."""
    return "".join("\\" + c if c in _MAGIC or c == "]" else c for c in text)


def _merge(ranges: list[tuple[int, int]]) -> Ranges:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


def _complement(ranges: Ranges) -> Ranges:
    out: list[tuple[int, int]] = []
    nxt = 0
    for lo, hi in ranges:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= _MAX:
        out.append((nxt, _MAX))
    return tuple(out)


def _meet(a: Ranges, b: Ranges) -> bool:
    """Whether two interval sets share a character (both sorted)."""
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i][1] < b[j][0]:
            i += 1
        elif b[j][1] < a[i][0]:
            j += 1
        else:
            return True
    return False


def _without_slash(ranges: Ranges) -> Ranges:
    out: list[tuple[int, int]] = []
    for lo, hi in ranges:
        if lo <= 47 <= hi:
            if lo < 47:
                out.append((lo, 46))
            if hi > 47:
                out.append((48, hi))
        else:
            out.append((lo, hi))
    return tuple(out)


def _contains(ranges: Ranges, code: int) -> bool:
    return any(lo <= code <= hi for lo, hi in ranges)


def _ascii(chars: str) -> list[tuple[int, int]]:
    return [(ord(c), ord(c)) for c in chars]


_DIGIT: Final = [(48, 57)]
_UPPER: Final = [(65, 90)]
_LOWER: Final = [(97, 122)]
#: Non-ASCII letters are taken to be in every letter-like class: a larger
#: class only ever makes the guard match more.
_WIDE: Final = [(128, _MAX)]
_PUNCT: Final = [(33, 47), (58, 64), (91, 96), (123, 126)]
_POSIX: Final[dict[str, list[tuple[int, int]]]] = {
    "alpha": _UPPER + _LOWER + _WIDE,
    "digit": _DIGIT,
    "alnum": _DIGIT + _UPPER + _LOWER + _WIDE,
    "upper": _UPPER + _WIDE,
    "lower": _LOWER + _WIDE,
    "space": _ascii(" \t\n\r\f\v"),
    "blank": _ascii(" \t"),
    "punct": _PUNCT + _WIDE,
    "print": [(32, 126), *_WIDE],
    "graph": [(33, 126), *_WIDE],
    "xdigit": [*_DIGIT, (65, 70), (97, 102)],
    "cntrl": [(0, 31), (127, 127)],
    "word": _DIGIT + _UPPER + _LOWER + _ascii("_") + _WIDE,
}


def _class(text: str, start: int) -> tuple[Ranges, int] | None:
    """The bracket expression at ``text[start] == "["``: (its set, the index
    after it); None when it does not close (then ``[`` is a literal)."""
    i = start + 1
    negate = i < len(text) and text[i] in "!^"
    if negate:
        i += 1
    items: list[tuple[int, int]] = []
    first = True
    while i < len(text):
        c = text[i]
        if c == "]" and not first:
            got = _merge(items)
            got = _complement(got) if negate else got
            return _without_slash(got), i + 1
        first = False
        if c == "[" and text.startswith("[:", i):
            end = text.find(":]", i + 2)
            name = text[i + 2 : end] if end > 0 else ""
            if name in _POSIX:
                items.extend(_POSIX[name])
                i = end + 2
                continue
        if c == "\\" and i + 1 < len(text):
            i += 1
            c = text[i]
        lo = ord(c)
        if text.startswith("-", i + 1) and i + 2 < len(text) and text[i + 2] != "]":
            hi = ord(text[i + 2])
            if lo <= hi:
                items.append((lo, hi))
            i += 3
            continue
        items.append((lo, lo))
        i += 1
    return None


# Tokens: a character set, or one of the repetition markers below.
_STAR: Final = "*"  # any run within a name
_ANYSEQ: Final = "**"  # any run at all (the glob is only "**")
_PREFIX: Final = "**/"  # (any run ending in "/")?  -- zero or more names
_SUFFIX: Final = "/**"  # ("/" any run)?  -- the path itself or below it
Token = Ranges | str


def _name_tokens(name: str) -> list[Token]:
    out: list[Token] = []
    i = 0
    while i < len(name):
        c = name[i]
        if c == "*":
            if not out or out[-1] != _STAR:
                out.append(_STAR)
            i += 1
        elif c == "?":
            out.append(_NOT_SLASH)
            i += 1
        elif c == "[" and (got := _class(name, i)) is not None:
            out.append(got[0])
            i = got[1]
        else:
            if c == "\\" and i + 1 < len(name):
                i += 1
                c = name[i]
            out.append(((ord(c), ord(c)),))
            i += 1
    return out


def _tokens(text: str) -> list[Token]:
    names = text.split("/")
    out: list[Token] = []
    last = len(names) - 1
    for i, name in enumerate(names):
        if name == "**":
            if last == 0:
                out.append(_ANYSEQ)
            elif i == last:
                out.pop()  # the "/" before it is part of the suffix
                out.append(_SUFFIX)
            else:
                out.append(_PREFIX)  # takes the "/" after it
            continue
        out.extend(_name_tokens(name))
        if i < last:
            out.append(_SLASH)
    return out


class Glob:
    """One compiled glob."""

    __slots__ = ("_closures", "_dfa", "_eps", "_final", "_matched", "_moves", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self._moves: list[list[tuple[Ranges, int]]] = [[]]
        self._eps: list[list[int]] = [[]]
        cur = 0
        for token in _tokens(text):
            cur = self._add(cur, token)
        self._final = cur
        self._closures = [self._closure(s) for s in range(len(self._moves))]
        # Built as paths are matched (subset construction on the fly): a
        # guard matches the same few globs against every path of every call.
        self._dfa: dict[tuple[frozenset[int], int], frozenset[int]] = {}
        self._matched: dict[str, bool] = {}

    def _new(self) -> int:
        self._moves.append([])
        self._eps.append([])
        return len(self._moves) - 1

    def _add(self, cur: int, token: Token) -> int:
        if not isinstance(token, str):
            nxt = self._new()
            self._moves[cur].append((token, nxt))
            return nxt
        loop = self._new()
        end = self._new()
        if token in (_STAR, _ANYSEQ):
            self._eps[cur].append(loop)
            self._moves[loop].append((_NOT_SLASH if token == _STAR else _ANY, loop))
            self._eps[loop].append(end)
        elif token == _PREFIX:
            self._eps[cur].append(end)
            self._moves[cur].append((_ANY, loop))
            self._moves[loop].append((_ANY, loop))
            self._moves[loop].append((_SLASH, end))
        else:  # _SUFFIX
            self._eps[cur].append(end)
            self._moves[cur].append((_SLASH, loop))
            self._moves[loop].append((_ANY, loop))
            self._eps[loop].append(end)
        return end

    def _closure(self, state: int) -> frozenset[int]:
        seen = {state}
        todo = [state]
        while todo:
            for nxt in self._eps[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return frozenset(seen)

    def match(self, path: str) -> bool:
        """Whether ``path`` (a literal path) is one this glob names."""
        known = self._matched.get(path)
        if known is not None:
            return known
        if len(self._dfa) > _DFA_MAX:
            self._dfa.clear()
        if len(self._matched) > _DFA_MAX:
            self._matched.clear()
        dfa = self._dfa
        states = self._closures[0]
        found = True
        for ch in path:
            key = (states, ord(ch))
            nxt = dfa.get(key)
            if nxt is None:
                nxt = dfa[key] = self._step(states, key[1])
            if not nxt:
                found = False
                break
            states = nxt
        found = found and self._final in states
        self._matched[path] = found
        return found

    def _step(self, states: frozenset[int], code: int) -> frozenset[int]:
        nxt: set[int] = set()
        for s in states:
            for ranges, target in self._moves[s]:
                if _contains(ranges, code):
                    nxt |= self._closures[target]
        return frozenset(nxt)

    def intersects(self, other: Glob) -> bool:
        """Whether some path is named by both globs (a product walk)."""
        start = [(p, q) for p in self._closures[0] for q in other._closures[0]]
        seen = set(start)
        todo = list(start)
        while todo:
            if len(seen) > PAIRS_MAX:
                return True
            p, q = todo.pop()
            if p == self._final and q == other._final:
                return True
            for r1, t1 in self._moves[p]:
                for r2, t2 in other._moves[q]:
                    if not _meet(r1, r2):
                        continue
                    for pair in (
                        (a, b) for a in self._closures[t1] for b in other._closures[t2]
                    ):
                        if pair not in seen:
                            seen.add(pair)
                            todo.append(pair)
        return False

    def __repr__(self) -> str:
        return f"Glob({self.text!r})"
