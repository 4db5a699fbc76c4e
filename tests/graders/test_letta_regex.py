"""letta regexes match exactly as Python's ``re`` (letta-evals' engine), time-boxed."""

from __future__ import annotations

import re
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trajgrade.graders.letta._functions import (
    InvalidPatternError,
    compile_pattern,
    run_timed,
)
from trajgrade.graders.letta._regex import findall
from trajgrade.graders.matching._match import MatchTimeout

#: Where the `regex` module and `re` disagree (the issue's examples).
TEXTS = [
    "",
    "abc",
    "[[:alpha:]] :a",
    "नमस्ते दुनिया",  # Devanagari with combining vowel signs
    "ภาษาไทย",  # Thai with combining marks
    "cafe\u0301 x",  # decomposed accent
    "a\x1cb\x1dc\x1ed\x1fe f",  # file/group/record/unit separators
    "STRASSE straße Kelvin \u212a k",
    "K\u212ak \u212aK",  # Kelvin sign beside K: folds together only in Unicode mode
    "12-12 3-4 ٣٤",
    "a\nb\nc\n",
]
PATTERNS = [
    r"[[:alpha:]]+",
    r"\w+",
    r"\b\w+\b",
    r"\B.",
    r"\s",
    r"\S+",
    r"[^\W\d]+",
    r"(?i)strasse|kelvin|k",
    r"(?i)(\w)\1",
    r"(?ia)(\w)\1",
    r"(?P<n>\d+)-(?P=n)",
    r"(?m)^\w+$",
    r"(?s)a.+",
    r"(a)?(?(1)b|c)",
    r"(?a)\w+",
    r"(?>\w+)\s",
    r"\w++\b",
    r"(?<=\w)\W",
    r"\Z",
]


def _same(pattern: str, text: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        expected = re.compile(pattern)
    got = compile_pattern(pattern)
    assert got.groups == expected.groups and got.groupindex == expected.groupindex
    want = [(m.span(), m.groups()) for m in expected.finditer(text)]
    assert [(m.span(), m.groups()) for m in got.finditer(text)] == want, pattern
    assert findall(got, text, timeout=5) == expected.findall(text)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_known_differences_of_the_regex_module_are_gone(pattern: str) -> None:
    for text in TEXTS:
        _same(pattern, text)


ATOMS = st.sampled_from(
    [
        "a",
        "b",
        "K",
        "ß",
        "é",
        "\u0301",
        "ं",
        "\x1c",
        " ",
        ".",
        r"\w",
        r"\W",
        r"\s",
        r"\S",
        r"\d",
        r"\D",
        r"\b",
        r"\B",
        "[a-z]",
        "[^a]",
        r"[\w-]",
        "[[:alpha:]]",
        "^",
        "$",
        r"\A",
        r"\Z",
        "(a|b)",
        "(?:ab)",
        r"(\w)\1",
    ]
)


@st.composite
def patterns(draw: st.DrawFn) -> str:
    parts = draw(st.lists(ATOMS, min_size=1, max_size=5))
    out = []
    for part in parts:
        q = draw(st.sampled_from(["", "", "*", "+?", "?", "{1,2}", "++"]))
        out.append(f"(?:{part}){q}" if q else part)
    flags = draw(st.sampled_from(["", "(?i)", "(?a)", "(?m)", "(?s)", "(?ia)"]))
    body = "".join(out)
    return flags + body


TEXT_CHARS = st.sampled_from(
    [*"abkKSsß .\n_1٣", "\u0301", "ं", "\x1c", "\x1f", "\u212a", "ǅ", "é", "न"]
)


@settings(max_examples=400, deadline=None)
@given(patterns(), st.text(TEXT_CHARS, max_size=12))
def test_generated_patterns_match_as_re_does(pattern: str, text: str) -> None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            re.compile(pattern)
    except re.error:
        with pytest.raises(InvalidPatternError):
            compile_pattern(pattern)
        return
    _same(pattern, text)


def test_invalid_patterns_carry_res_message() -> None:
    with pytest.raises(
        InvalidPatternError, match="missing \\), unterminated subpattern"
    ):
        compile_pattern("(a")


def test_the_time_box_still_holds() -> None:
    pattern = compile_pattern(r"(\w|\w\w)+$")
    with pytest.raises(MatchTimeout, match=r"ran longer than 0\.05s"):
        run_timed(
            pattern.search,
            "a" * 40 + "!",
            source="(\\w|\\w\\w)+$",
            where="test",
            timeout=0.05,
        )
