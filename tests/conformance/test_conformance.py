"""Every upstream conformance case, through the public path a user takes.

config text -> ``decode_config`` -> ``compile_suite`` -> the trace serialised in
its upstream format -> ``grade_bytes`` (format auto-detected) -> the verdict.

Cases come from ``../shared/conformance/`` (found relative to the repository,
or via ``TRAJGRADE_SHARED``) and from every ``*.jsonl`` in the directories
listed in ``TRAJGRADE_EXTRA_CASES`` (``os.pathsep``-separated). Test ids are
the cases' ``source`` strings.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from trajgrade.config import compile_suite, decode_config
from trajgrade.errors import ConfigError
from trajgrade.pipeline import grade_bytes
from trajgrade.verdicts import Outcome

HERE = Path(__file__).resolve()
SHARED = Path(os.environ.get("TRAJGRADE_SHARED", HERE.parents[3] / "shared"))
#: Upstream case files this release implements.
SUITES = ("vally.jsonl",)


def _case_files() -> list[Path]:
    files = [SHARED / "conformance" / name for name in SUITES]
    extra = os.environ.get("TRAJGRADE_EXTRA_CASES", "")
    for d in filter(None, extra.split(os.pathsep)):
        files.extend(sorted(Path(d).glob("*.jsonl")))
    return files


def _cases() -> list[Any]:
    params = []
    for path in _case_files():
        if not path.exists():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                case = json.loads(line)
                params.append(pytest.param(case, id=case["source"], marks=()))
    return params


CASES = _cases()


def test_shared_cases_are_present() -> None:
    """The shared conformance files are found, so the parametrised run is not empty."""
    assert (SHARED / "conformance" / "vally.jsonl").exists(), (
        f"set TRAJGRADE_SHARED (looked in {SHARED})"
    )
    assert len(CASES) >= 72


def _config_text(case: dict[str, Any]) -> str:
    return yaml.safe_dump(
        {"graders": [{"type": case["grader"], "config": case["config"]}]},
        sort_keys=False,
    )


def _trace_bytes(case: dict[str, Any]) -> bytes:
    return (json.dumps(case["trace"]) + "\n").encode()


@pytest.mark.parametrize("case", CASES)
def test_conformance(case: dict[str, Any]) -> None:
    """trajgrade gives the upstream's verdict for this case."""
    expect = case["expect"]
    text = _config_text(case)
    if expect.get("config_error"):
        needle = expect.get("error_contains", "")
        try:
            suite = compile_suite(decode_config(text, name="case.yaml"))
        except ConfigError as exc:
            assert needle in str(exc), f"config error {exc} lacks {needle!r}"
            return
        result = grade_bytes(suite, _trace_bytes(case), source="case")
        (verdict,) = [v for v in result.verdicts if v.final]
        assert verdict.outcome is Outcome.ERROR, (
            f"expected a configuration error, got {verdict}"
        )
        assert needle in verdict.evidence
        return
    suite = compile_suite(decode_config(text, name="case.yaml"))
    result = grade_bytes(suite, _trace_bytes(case), source="case")
    assert not result.errors, result.errors
    finals = [v for v in result.verdicts if v.final]
    assert len(finals) == 1, result.verdicts
    (verdict,) = finals
    if "pass" in expect:
        assert verdict.passed is expect["pass"], verdict
    if "score" in expect:
        assert math.isclose(verdict.score, expect["score"], abs_tol=1e-9), verdict
    if "metadata" in expect:
        for key, value in expect["metadata"].items():
            assert verdict.metadata[key] == value, (key, verdict.metadata)
    if "evidence" in expect:
        assert verdict.evidence == expect["evidence"]
