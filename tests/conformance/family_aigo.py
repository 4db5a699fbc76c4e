"""AI GO! cases: the scorer under AI GO!'s `scorers:` list; trace = OpenResponses items."""

from __future__ import annotations

import json
import math
from typing import Any

import yaml

from trajgrade.errors import ConfigError
from trajgrade.pipeline.whole import GradeResult

#: The six outputs AI GO! documents; each is in the verdict metadata.
OUTPUTS = (
    "all_required_calls_made",
    "required_calls_coverage",
    "num_required_calls_made",
    "num_required_calls_not_made",
    "num_unrequired_calls",
    "num_required_calls_total",
)


def config_text(case: dict[str, Any]) -> str:
    """The config as an AI GO! task file writes it."""
    return yaml.safe_dump({"scorers": [case["config"]]}, sort_keys=False)


def trace_bytes(case: dict[str, Any]) -> bytes:
    """The trace as one line: a JSON array of OpenResponses items."""
    return (json.dumps(case["trace"]) + "\n").encode()


def samples(case: dict[str, Any]) -> dict[str, Any] | None:
    """The case's dataset row, matched to the trace (named after the source, "case")."""
    return {"case": case["sample"]} if "sample" in case else None


def check_config_error(case: dict[str, Any], exc: ConfigError) -> None:
    """A load-time configuration error names what the case expects."""
    assert case["expect"].get("config_error"), f"unexpected config error: {exc}"
    assert case["expect"].get("error_contains", "") in str(exc)


def check(case: dict[str, Any], result: GradeResult) -> None:
    """The final verdict gives the expected pass, score and all six outputs."""
    expect = case["expect"]
    assert not result.errors, result.errors
    finals = [v for v in result.verdicts if v.final]
    assert len(finals) == 1, result.verdicts
    (verdict,) = finals
    if "pass" in expect:
        assert verdict.passed is expect["pass"], verdict
    if "score" in expect:
        assert math.isclose(verdict.score, expect["score"], abs_tol=1e-9), verdict
    for key in OUTPUTS:
        if key not in expect:
            continue
        got, want = verdict.metadata[key], expect[key]
        if want is None or isinstance(want, bool):
            assert got is want, (key, verdict.metadata)
        else:
            assert got is not None and math.isclose(got, want, abs_tol=1e-9), (
                key,
                verdict.metadata,
            )
