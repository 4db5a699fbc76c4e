"""agentv cases: the entry under agentv's ``execution.evaluators``; trace = one
agentv record (``output_messages``); parser cases (``trace: null``) compare
the compiled grader's ``normalized_config`` and warnings."""

from __future__ import annotations

import json
import math
from typing import Any

import yaml

from trajgrade.config.compile import compile_suite
from trajgrade.config.decode import decode_config
from trajgrade.config.model import Suite
from trajgrade.errors import ConfigError
from trajgrade.pipeline.whole import GradeResult

#: Upstream unit tests build evaluators without the parser, so without a
#: name; agentv's file layout needs one (an unnamed entry is skipped).
DEFAULT_NAME = "tool_trajectory"


def _entry(case: dict[str, Any]) -> dict[str, Any]:
    entry = dict(case["config"])
    entry.setdefault("name", DEFAULT_NAME)
    if case.get("semantics", "all") != "all":
        entry["agentv_compat"] = case["semantics"]
    return entry


def config_text(case: dict[str, Any]) -> str:
    """The config as an agentv eval file writes it."""
    return yaml.safe_dump(
        {"execution": {"evaluators": [_entry(case)]}},
        sort_keys=False,
        allow_unicode=True,
    )


def trace_bytes(case: dict[str, Any]) -> bytes:
    """The trace as one agentv record (nothing for parser-only cases)."""
    if case["trace"] is None:
        return b""
    return (json.dumps(case["trace"]) + "\n").encode()


def samples(case: dict[str, Any]) -> dict[str, Any] | None:
    """agentv cases carry no dataset rows."""
    return None


def _suite(case: dict[str, Any]) -> Suite:
    return compile_suite(decode_config(config_text(case), name="case.yaml"))


def check_config_error(case: dict[str, Any], exc: ConfigError) -> None:
    """What agentv skips with a warning is a config error naming the problem."""
    expect = case["expect"]
    assert expect.get("config_error"), f"unexpected config error: {exc}"
    assert expect.get("error_contains", "") in str(exc), str(exc)
    if expect.get("upstream") == "skipped":
        assert "agentv skips this evaluator" in str(exc), str(exc)


def check(case: dict[str, Any], result: GradeResult) -> None:
    """The final verdict (or the parsed config) matches the case's expectation."""
    expect = case["expect"]
    assert not expect.get("config_error"), f"expected a config error, got {result}"
    suite = _suite(case)
    config_warnings = [str(w) for w in suite.warnings]
    if case["trace"] is None:
        (grader,) = suite.graders
        assert grader.normalized_config == expect["normalized_config"]  # type: ignore[attr-defined]
        for text in expect.get("warning_contains", []):
            assert any(text in w for w in config_warnings), config_warnings
        assert result.verdicts == []
        return
    assert not result.errors, result.errors
    finals = [v for v in result.verdicts if v.final]
    assert len(finals) == 1, result.verdicts
    (verdict,) = finals
    meta = verdict.metadata
    if "pass" in expect:
        assert verdict.passed is expect["pass"], verdict
    if "score" in expect:
        assert math.isclose(verdict.score, expect["score"], abs_tol=1e-9), verdict
    if "verdict" in expect:
        wanted = expect["verdict"]
        if wanted == "borderline" and case.get("semantics") != "agentv<2.7.1":
            # Only agentv 2.x reported the borderline band; later releases
            # (and trajgrade's default) say fail, as the case note allows.
            wanted = "fail"
        assert meta["verdict"] == wanted, meta
    for key in ("hits", "misses", "aspects"):
        if key in expect:
            got = meta[key] if key == "aspects" else len(meta[key])
            assert got == expect[key], (key, meta)
    for key, texts in (("hits", "hit_contains"), ("misses", "miss_contains")):
        for text in expect.get(texts, []):
            assert any(text in t for t in meta[key]), (text, meta[key])
    warnings = [*meta.get("warnings", []), *config_warnings]
    for text in expect.get("warning_contains", []):
        assert any(text in w for w in warnings), (text, warnings)
