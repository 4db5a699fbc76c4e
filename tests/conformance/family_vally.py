"""vally cases: grader config under vally's `graders:` list; trace = vally Trajectory."""

from __future__ import annotations

import json
import math
from typing import Any

import yaml

from trajgrade.errors import ConfigError
from trajgrade.pipeline.whole import GradeResult
from trajgrade.verdicts import Outcome

GRADERS = (
    "tool-calls",
    "token-budget",
    "tool-call-count",
    "turn-count",
    "error-count",
    "wall-time",
)


def config_text(case: dict[str, Any]) -> str:
    """The config as a vally user writes it."""
    return yaml.safe_dump(
        {"graders": [{"type": case["grader"], "config": case["config"]}]},
        sort_keys=False,
    )


def trace_bytes(case: dict[str, Any]) -> bytes:
    """The trace in vally's own format (one Trajectory record)."""
    return (json.dumps(case["trace"]) + "\n").encode()


def samples(case: dict[str, Any]) -> dict[str, Any] | None:
    """vally cases carry no dataset rows."""
    return None


def check_config_error(case: dict[str, Any], exc: ConfigError) -> None:
    """A load-time configuration error names what the case expects."""
    assert case["expect"].get("config_error"), f"unexpected config error: {exc}"
    assert case["expect"].get("error_contains", "") in str(exc)


def check(case: dict[str, Any], result: GradeResult) -> None:
    """The final verdict matches the case's expectation."""
    expect = case["expect"]
    finals = [v for v in result.verdicts if v.final]
    if expect.get("config_error"):
        # Found while grading (command/path absent on a call): an error verdict.
        (verdict,) = finals
        assert verdict.outcome is Outcome.ERROR, (
            f"expected a configuration error, got {verdict}"
        )
        assert expect.get("error_contains", "") in verdict.evidence
        return
    assert not result.errors, result.errors
    assert len(finals) == 1, result.verdicts
    (verdict,) = finals
    if "pass" in expect:
        assert verdict.passed is expect["pass"], verdict
    if "score" in expect:
        assert math.isclose(verdict.score, expect["score"], abs_tol=1e-9), verdict
    for key, value in expect.get("metadata", {}).items():
        assert verdict.metadata[key] == value, (key, verdict.metadata)
    if "evidence" in expect:
        assert verdict.evidence == expect["evidence"]
