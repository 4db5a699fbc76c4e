r"""letta-evals regexes: Python ``re``'s semantics, with a time box.

letta-evals matches with ``re``, which has no timeout; the ``regex`` module
has one (the ReDoS guard) but differs from ``re`` on the character level:
``[[:alpha:]]`` is a POSIX class in ``regex`` and a plain set in ``re``;
``\w``/``\b`` disagree on combining marks (Hindi, Thai, decomposed accents);
``\s`` disagrees on U+001C..U+001F; case-insensitive matching folds
differently. The *control* constructs (groups, alternation, greedy, lazy and
possessive repeats, lookaround, backreferences, conditionals, atomic groups)
behave alike in both backtracking engines.

So a pattern is parsed by ``re``'s own parser (it is valid exactly when
``re`` accepts it) and written out again for ``regex`` with every
character-level decision made by ``re`` itself: each set, category, ``.``
and case-insensitive literal becomes an explicit set of code-point ranges,
computed once by running ``re`` over all of Unicode (cached per process);
``\b``/``\B`` become lookarounds over ``re``'s ``\w``; anchors become their
flag-free equivalents. The result has no flags, so ``regex``'s own Unicode
tables never decide anything, and it runs with ``regex``'s timeout.

This module is letta's alone: other graders' user patterns have their own
engines and semantics (``trajgrade.graders.matching._match``).
"""

from __future__ import annotations

import functools
import re
import warnings

# re's own parser (public as sre_parse before 3.11): the pattern is read
# exactly as re reads it.
from re import _constants as C  # type: ignore[attr-defined]
from re import _parser  # type: ignore[attr-defined]
from typing import Any, Final

import regex

__all__ = ("compile_re", "translate")

_ALL_CHARS: Final = 0x110000
#: re's ``\B`` does not match an empty string before Python 3.14.
_B_MATCHES_EMPTY: Final = re.search(r"\B", "") is not None
_CASE_FLAGS: Final = re.IGNORECASE | re.ASCII


@functools.cache
def _universe() -> str:
    """Every code point (surrogates too: Python strings may hold them)."""
    return "".join(map(chr, range(_ALL_CHARS)))


def _u(cp: int) -> str:
    return f"\\U{cp:08x}"


Runs = tuple[tuple[int, int], ...]


def _runs(pattern: str, flags: int, engine: Any = re) -> Runs:
    """Code points ``engine`` matches with a one-character ``pattern``, as runs."""
    found = engine.finditer(f"(?:{pattern})+", _universe(), flags)
    return tuple((m.start(), m.end() - 1) for m in found)


def _minus(a: Runs, b: Runs) -> Runs:
    """Interval difference ``a - b`` of sorted, disjoint run lists."""
    out: list[tuple[int, int]] = []
    j = 0
    for lo, hi in a:
        while j < len(b) and b[j][1] < lo:
            j += 1
        k, start = j, lo
        while k < len(b) and b[k][0] <= hi:
            if b[k][0] > start:
                out.append((start, b[k][0] - 1))
            start = max(start, b[k][1] + 1)
            k += 1
        if start <= hi:
            out.append((start, hi))
    return tuple(out)


def _set(runs: Runs) -> str:
    parts = (_u(a) if a == b else f"{_u(a)}-{_u(b)}" for a, b in runs)
    return "[" + "".join(parts) + "]"


#: regex classes that are fast (table lookups) and close to re's big sets;
#: a big set is written as the closest one plus small corrections, because
#: regex scans an explicit set of hundreds of ranges slowly.
_BASES: Final = (
    r"[\p{L}\p{N}_]",
    r"[^\p{L}\p{N}_]",
    r"\s",
    r"\S",
    r"\p{Nd}",
    r"\P{Nd}",
    r"[\p{L}\p{N}_\p{Nd}]",
)
_SMALL: Final = 24


@functools.cache
def _base_runs(base: str) -> Runs:
    return _runs(base, 0, regex)


@functools.lru_cache(maxsize=4096)
def _members(re_set: str, flags: int) -> str:
    """The code points ``re`` matches with the one-character pattern ``re_set``,
    as a ``regex`` expression (found by running ``re`` over all of Unicode)."""
    runs = _runs(re_set, flags)
    if not runs:
        return r"[^\U00000000-\U0010ffff]"  # matches nothing
    if len(runs) <= _SMALL:
        return _set(runs)
    best, cost = _set(runs), len(runs)
    for base in _BASES:
        b = _base_runs(base)
        drop, add = _minus(b, runs), _minus(runs, b)
        if len(drop) + len(add) < cost:
            cost = len(drop) + len(add)
            core = f"{base}(?<!{_set(drop)})" if drop else base
            best = f"(?:{core}|{_set(add)})" if add else f"(?:{core})"
    return best


_CATEGORIES: Final = {
    C.CATEGORY_DIGIT: r"\d",
    C.CATEGORY_NOT_DIGIT: r"\D",
    C.CATEGORY_SPACE: r"\s",
    C.CATEGORY_NOT_SPACE: r"\S",
    C.CATEGORY_WORD: r"\w",
    C.CATEGORY_NOT_WORD: r"\W",
}


def _re_set(items: list[tuple[Any, Any]]) -> str:
    """An IN node's items as a ``re`` set."""
    out: list[str] = []
    for op, av in items:
        if op is C.NEGATE:
            out.insert(0, "^")
        elif op is C.LITERAL:
            out.append(_u(av))
        elif op is C.RANGE:
            out.append(f"{_u(av[0])}-{_u(av[1])}")
        elif op is C.CATEGORY:
            out.append(_CATEGORIES[av])
        else:  # pragma: no cover - re's parser emits nothing else in a set
            msg = f"unexpected set item {op}"
            raise AssertionError(msg)
    return "[" + "".join(out) + "]"


class _Writer:
    """Writes a parsed ``re`` pattern as an equivalent flag-free ``regex`` one."""

    def __init__(self, names: dict[int, str]) -> None:
        self.names = names

    def seq(self, items: Any, flags: int) -> str:
        return "".join(self.node(op, av, flags) for op, av in items)

    def chars(self, re_set: str, flags: int) -> str:
        return _members(re_set, flags & _CASE_FLAGS)

    def word(self, flags: int) -> str:
        return self.chars(r"[\w]", flags & re.ASCII)

    def node(self, op: Any, av: Any, flags: int) -> str:
        """One parsed node; the character-level ones are decided here, by ``re``."""
        if op is C.LITERAL:
            if flags & re.IGNORECASE:
                return self.chars(_u(av), flags)
            return _u(av)
        if op is C.NOT_LITERAL:
            return self.chars(f"[^{_u(av)}]", flags)
        if op is C.IN:
            if flags & re.IGNORECASE or any(item is C.CATEGORY for item, _ in av):
                return self.chars(_re_set(av), flags)
            return _re_set(av)  # code points and ranges mean the same in both
        if op is C.ANY:
            return r"[\U00000000-\U0010ffff]" if flags & re.DOTALL else r"[^\n]"
        if op is C.AT:
            return self.at(av, flags)
        return self.control(op, av, flags)

    def control(self, op: Any, av: Any, flags: int) -> str:
        """A control construct (group, alternation, repeat, backreference,
        conditional, lookaround, atomic group): written as it is, around its
        rewritten parts, since both engines give these the same meaning."""
        if op is C.SUBPATTERN:
            group, add, remove, sub = av
            inner = self.seq(sub, (flags | add) & ~remove)
            if group is None:
                return f"(?:{inner})"
            name = self.names.get(group)
            return f"(?P<{name}>{inner})" if name else f"({inner})"
        if op is C.BRANCH:
            return "(?:" + "|".join(self.seq(b, flags) for b in av[1]) + ")"
        if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            low, high, sub = av
            bound = f"{{{low},}}" if high is C.MAXREPEAT else f"{{{low},{high}}}"
            suffix = {C.MAX_REPEAT: "", C.MIN_REPEAT: "?"}.get(op, "+")
            return f"(?:{self.seq(sub, flags)}){bound}{suffix}"
        if op is C.GROUPREF:
            ref = f"(?:\\g<{av}>)"
            return f"(?i:\\g<{av}>)" if flags & re.IGNORECASE else ref
        if op is C.GROUPREF_EXISTS:
            group, yes, no = av
            other = "" if no is None else "|" + self.seq(no, flags)
            return f"(?({group}){self.seq(yes, flags)}{other})"
        if op in (C.ASSERT, C.ASSERT_NOT):
            direction, sub = av
            kind = {(C.ASSERT, 1): "=", (C.ASSERT, -1): "<=", (C.ASSERT_NOT, 1): "!"}
            return f"(?{kind.get((op, direction), '<!')}{self.seq(sub, flags)})"
        if op is C.ATOMIC_GROUP:
            return f"(?>{self.seq(av, flags)})"
        msg = f"unexpected regex node {op}"  # pragma: no cover
        raise AssertionError(msg)

    def at(self, av: Any, flags: int) -> str:
        if av is C.AT_BEGINNING:
            return "(?m:^)" if flags & re.MULTILINE else r"\A"
        if av is C.AT_BEGINNING_STRING:
            return r"\A"
        if av is C.AT_END:
            return "(?m:$)" if flags & re.MULTILINE else "(?-m:$)"
        if av is C.AT_END_STRING:
            return r"\Z"
        w = self.word(flags)
        if av is C.AT_BOUNDARY:
            return f"(?:(?<={w})(?!{w})|(?<!{w})(?={w}))"
        inside = f"(?:(?<={w})(?={w})|(?<!{w})(?!{w}))"
        return inside if _B_MATCHES_EMPTY else rf"(?:(?!\A\Z){inside})"


@functools.lru_cache(maxsize=1024)
def translate(source: str) -> str:
    """``source`` (Python ``re`` syntax) as a flag-free ``regex`` pattern with
    ``re``'s semantics; ``re.error`` when ``re`` rejects it."""
    with warnings.catch_warnings():
        # re's FutureWarnings ("Possible nested set") are about re's own
        # future; letta-evals' users see them from Python, not from us.
        warnings.simplefilter("ignore", FutureWarning)
        re.compile(source)  # the validity check and error text are re's
        parsed = _parser.parse(source, 0)
    names = {number: name for name, number in parsed.state.groupdict.items()}
    flags = parsed.state.flags
    body = _Writer(names).seq(parsed, flags)
    # The written pattern is flag-free but for backreferences under (?i),
    # which compare with regex's case folding: a pattern-wide (?a) folds
    # ASCII only, as re does (regex ignores a scoped a flag; docs/fidelity.md).
    return f"(?a){body}" if flags & re.ASCII else body


def compile_re(source: str) -> regex.Pattern[str]:
    """``source`` compiled for ``regex`` (with its timeout) but matching as ``re``."""
    return regex.compile(translate(source), regex.VERSION0)


def findall(pattern: regex.Pattern[str], text: str, *, timeout: float) -> list[Any]:
    """``re.findall``'s result, built from matches: ``regex.findall`` returns
    1-tuples for some one-group patterns (``a*(a|b)+?``) where ``re`` returns
    strings."""
    n = pattern.groups
    out: list[Any] = []
    for m in pattern.finditer(text, timeout=timeout):
        if n == 0:
            out.append(m.group(0))
        elif n == 1:
            out.append(m.group(1) or "")
        else:
            out.append(tuple(g or "" for g in m.groups()))
    return out
