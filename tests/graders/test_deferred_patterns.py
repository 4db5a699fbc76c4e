"""Patterns compiled under ``deferred_compiles`` (the hook's cached policy).

A deferred pattern answers exactly as an eagerly compiled one (a property
over random JavaScript patterns and strings); its compile happens at its
first use; a source that does not compile is an error verdict at its use,
never a crash, and outside the block a bad source is still a located error.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.graders.test_re2 import ALPHABET, js_patterns

from trajgrade.graders.matching._match import (
    JSRegexError,
    MatchTimeout,
    Pattern,
    deferred_compiles,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pattern=js_patterns(),
    texts=st.lists(st.text(alphabet=ALPHABET, max_size=12), min_size=1, max_size=8),
)
def test_deferred_and_eager_patterns_agree(pattern: str, texts: list[str]) -> None:
    try:
        eager = Pattern(pattern, field="f", timeout=5.0)
    except JSRegexError:
        return  # never cached: a policy with it does not compile
    with deferred_compiles():
        deferred = Pattern(pattern, field="f", timeout=5.0)
    for text in texts:
        assert deferred.search(text) == eager.search(text), (pattern, text)
    assert deferred.engine == eager.engine


def test_a_deferred_pattern_compiles_at_first_use() -> None:
    with deferred_compiles():
        p = Pattern("^(curl|wget)$", field="f", timeout=1.0)
    assert not p.compiled  # nothing compiled yet
    assert p.search("curl") and not p.search("xcurl")
    assert p.compiled


def test_a_literal_needs_no_compile_either_way() -> None:
    with deferred_compiles():
        p = Pattern("rm -rf /", field="f", timeout=1.0)
    assert p.compiled and p.engine == "literal"


def test_a_bad_source_is_an_error_verdict_when_deferred_and_located_when_not() -> None:
    with pytest.raises(JSRegexError):
        Pattern("a(b", field="graders[0].x", timeout=1.0)
    with deferred_compiles():
        p = Pattern("a(b", field="graders[0].x", timeout=1.0)
    with pytest.raises(MatchTimeout, match=r"graders\[0\]\.x.*does not compile"):
        p.search("ab")


def test_the_block_does_not_leak() -> None:
    with deferred_compiles():
        pass
    with pytest.raises(JSRegexError):
        Pattern("a(b", field="f", timeout=1.0)


def test_a_lone_surrogate_still_reaches_the_backtracking_engine() -> None:
    with deferred_compiles():
        p = Pattern("a.b", field="f", timeout=1.0)
    assert p.engine in ("re2", "backtracking")
    assert p.search("a\ud800b")
    assert not p.search("a\ud800\ud800b")
