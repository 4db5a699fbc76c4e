"""Compiled text matchers for user regexes: fast where possible, never stalling.

A :class:`Pattern` is compiled once from a JavaScript regex source (vally's
flavour, translated by ``_jsregex``). Plain literals take a ``str`` fast path
(substring, equality, prefix, suffix), which is exactly what the regex would
do. A pattern RE2 reads as the same language runs on RE2 (``_re2``), in
linear time: no input can make it stall. The rest (lookaround,
backreferences, ``(?i)``) runs on the backtracking ``regex`` module with a
per-call timeout: a catastrophic pattern on a 10 MB tool output is abandoned
after ``timeout`` seconds and becomes a :class:`MatchTimeout` (an ``error``
verdict), and after :data:`BREAKER_TRIPS` timeouts a per-pattern circuit
breaker refuses values that long at once, so 100 traces cannot each pay the
full timeout.

Tool names come from a small vocabulary, so :class:`NameMatcher` memoises
results per name; argument values and results are never cached.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Final

import msgspec

from trajgrade.errors import GradeError
from trajgrade.graders.matching._jsliteral import JSRegexError, literal_of

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ("JSRegexError", "MatchTimeout", "NameMatcher", "Pattern", "js_stringify")

_NAME_CACHE_MAX: Final = 4096


class MatchTimeout(GradeError):
    """A user regex ran longer than the configured timeout on one value."""


#: Timeouts of one pattern after which its circuit breaker opens.
BREAKER_TRIPS: Final = 2


class Pattern:
    """One compiled, unanchored JavaScript regex (or its literal fast path)."""

    __slots__ = ("_test", "engine", "field", "source")

    def __init__(self, source: str, *, field: str, timeout: float) -> None:
        """Compile ``source``; raise JSRegexError (the caller adds the location)."""
        self.source = source
        #: The config field this pattern came from, for messages.
        self.field = field
        #: ``literal`` (str methods), ``re2`` (linear time) or ``backtracking``
        #: (the regex module, time-boxed, with a circuit breaker).
        self.engine = "literal"
        self._test = self._compile(timeout)

    def search(self, text: str) -> bool:
        """Whether the pattern matches anywhere in ``text``; MatchTimeout if it
        ran out of time."""
        return self._test(text)

    def __repr__(self) -> str:
        return f"Pattern({self.source!r})"

    def _compile(self, timeout: float) -> Callable[[str], bool]:
        source = self.source
        lit = literal_of(source)
        if lit is not None:
            text, start, end = lit
            if start and end:
                return text.__eq__
            if start:
                return lambda s: s.startswith(text)
            if end:
                return lambda s: s.endswith(text)
            return (lambda s: text in s) if text else (lambda s: True)
        # Only a real regex needs an engine (imported here: see _jsliteral).
        from trajgrade.graders.matching._jsregex import compile_js, translate
        from trajgrade.graders.matching._re2 import compile_re2

        slow = _time_boxed(compile_js(source), source, self.field, timeout)
        fast = compile_re2(translate(source))
        if fast is None:
            self.engine = "backtracking"
            return slow
        self.engine = "re2"

        def test(s: str) -> bool:
            try:
                return fast(s)
            except UnicodeEncodeError:  # a lone surrogate: RE2 reads UTF-8 only
                return slow(s)

        return test


def _time_boxed(
    compiled: Any, source: str, field: str, timeout: float
) -> Callable[[str], bool]:
    """The backtracking engine with a per-call time box and a breaker: after
    :data:`BREAKER_TRIPS` timeouts, a value at least as long as the shortest
    one that timed out fails at once (an ``error`` verdict, as a timeout
    would give) instead of stalling the stream again."""
    timed_out: list[int] = []

    def test(s: str) -> bool:
        if len(timed_out) >= BREAKER_TRIPS and len(s) >= min(timed_out):
            msg = (
                f"regex {source!r} in {field} timed out {len(timed_out)} times "
                f"(on values of {min(timed_out):,}+ characters) and is no longer "
                f"run on values that long; simplify the pattern (avoid nested "
                f"quantifiers such as (a+)+ with lookaround or backreferences)"
            )
            raise MatchTimeout(msg)
        try:
            return compiled.search(s, timeout=timeout) is not None
        except TimeoutError:
            timed_out.append(len(s))
            msg = (
                f"regex {source!r} in {field} ran longer than {timeout:g}s on a "
                f"{len(s):,}-character value and was abandoned; simplify the pattern "
                f"(avoid nested quantifiers such as (a+)+) or raise --regex-timeout"
            )
            raise MatchTimeout(msg) from None

    return test


class NameMatcher:
    """A Pattern over tool names, memoised per name (names repeat; values don't)."""

    __slots__ = ("_cache", "pattern")

    def __init__(self, pattern: Pattern) -> None:
        self.pattern = pattern
        self._cache: dict[str, bool] = {}

    def __call__(self, name: str) -> bool:
        hit = self._cache.get(name)
        if hit is None:
            hit = self.pattern.search(name)
            if len(self._cache) < _NAME_CACHE_MAX:
                self._cache[name] = hit
        return hit


def _js_number(value: float) -> Any:
    # JSON.stringify writes integral floats without a fraction (1.0 -> 1) and
    # non-finite numbers as null.
    if not math.isfinite(value):
        return None
    return int(value) if value.is_integer() else value


def _jsonable(value: Any) -> Any:
    if isinstance(value, float):
        return _js_number(value)
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


_ENCODER: Final = msgspec.json.Encoder()


def js_stringify(value: Any) -> str:
    """``value`` as JavaScript's ``JSON.stringify`` writes it (compact, keys in
    insertion order); strings are returned unchanged (vally matches them raw)."""
    if isinstance(value, str):
        return value
    try:
        return _ENCODER.encode(_jsonable(value)).decode()
    except (TypeError, msgspec.EncodeError):
        return str(value)
