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
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final

import msgspec

from trajgrade.errors import GradeError
from trajgrade.graders.matching._jsliteral import JSRegexError, literal_of

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = (
    "JSRegexError",
    "MatchTimeout",
    "NameMatcher",
    "Pattern",
    "deferred_compiles",
    "js_stringify",
)

_NAME_CACHE_MAX: Final = 4096


class MatchTimeout(GradeError):
    """A user regex ran longer than the configured timeout on one value."""


#: Timeouts of one pattern after which its circuit breaker opens.
BREAKER_TRIPS: Final = 2


#: Set while compiling a policy already known to compile cleanly (the hook's
#: cached config): non-literal patterns are then compiled on first use, so a
#: cold hook process pays only for the regexes its one call reaches.
_DEFERRED: Final[ContextVar[bool]] = ContextVar(
    "trajgrade_deferred_regex", default=False
)


@contextmanager
def deferred_compiles() -> Iterator[None]:
    """Within this block, :class:`Pattern` defers regex compiles to first use.

    Only for sources that already compiled without error at this trajgrade
    version: a deferred pattern that still fails to compile raises
    :class:`MatchTimeout` (an ``error`` verdict) where it is used.
    """
    token = _DEFERRED.set(True)
    try:
        yield
    finally:
        _DEFERRED.reset(token)


class Pattern:
    """One compiled, unanchored JavaScript regex (or its literal fast path)."""

    __slots__ = ("_engine", "_timeout", "_validated", "field", "search", "source")

    #: Whether the pattern matches anywhere in a text; MatchTimeout if it ran
    #: out of time. The compiled test itself once compiled (no indirection
    #: on the hot path); before that, the first call compiles it.
    search: Callable[[str], bool]

    def __init__(self, source: str, *, field: str, timeout: float) -> None:
        """Compile ``source``; raise JSRegexError (the caller adds the location).

        Under :func:`deferred_compiles` a non-literal source is compiled at its
        first :meth:`search` instead.
        """
        self.source = source
        #: The config field this pattern came from, for messages.
        self.field = field
        self._timeout = timeout
        self._engine = "literal"
        #: Known to compile (deferred): the backtracking form, which is what
        #: validates a source, is then built only where it is needed.
        self._validated = _DEFERRED.get()
        test = self._literal()
        if test is None and not self._validated:
            test = self._compile()
        self.search = test or self._first_search

    @property
    def engine(self) -> str:
        """``literal`` (str methods), ``re2`` (linear time) or ``backtracking``
        (the regex module, time-boxed, with a circuit breaker)."""
        if self.compiled is False:
            self.search = self._compile()
        return self._engine

    @property
    def compiled(self) -> bool:
        """False while a deferred compile has not happened yet."""
        return getattr(self.search, "__func__", None) is not Pattern._first_search

    def __repr__(self) -> str:
        return f"Pattern({self.source!r})"

    def _first_search(self, text: str) -> bool:
        self.search = self._compile()
        return self.search(text)

    def _backtracking(self) -> Callable[[str], bool]:
        from trajgrade.graders.matching._jsregex import compile_js

        try:
            compiled = compile_js(self.source)
        except JSRegexError as exc:
            if not self._validated:
                raise
            # Validated when cached: only a changed engine gets here, and an
            # error verdict (fail-closed) is the answer, never a crash.
            msg = f"regex {self.source!r} in {self.field} does not compile: {exc}"
            raise MatchTimeout(msg) from None
        return _time_boxed(compiled, self.source, self.field, self._timeout)

    def _literal(self) -> Callable[[str], bool] | None:
        lit = literal_of(self.source)
        if lit is None:
            return None
        text, start, end = lit
        if start and end:
            return text.__eq__
        if start:
            return lambda s: s.startswith(text)
        if end:
            return lambda s: s.endswith(text)
        return (lambda s: text in s) if text else (lambda s: True)

    def _compile(self) -> Callable[[str], bool]:
        # Only a real regex needs an engine (imported here: see _jsliteral).
        from trajgrade.graders.matching._jsregex import translate
        from trajgrade.graders.matching._re2 import compile_re2

        # Compiling the backtracking form validates a source: a validated
        # one builds it only if RE2 cannot run it or meets a lone surrogate.
        slow = None if self._validated else self._backtracking()
        try:
            fast = compile_re2(translate(self.source))
        except JSRegexError:
            fast = None  # reported by the backtracking compile below
        if fast is None:
            self._engine = "backtracking"
            return slow or self._backtracking()
        self._engine = "re2"

        def test(s: str) -> bool:
            nonlocal slow
            try:
                return fast(s)
            except UnicodeEncodeError:  # a lone surrogate: RE2 reads UTF-8 only
                if slow is None:
                    slow = self._backtracking()
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
