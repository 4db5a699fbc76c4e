"""Every upstream conformance case, through the public path a user takes.

config text (in the upstream's own layout) -> ``decode_config`` ->
``compile_suite`` -> the trace serialised in its upstream format ->
``grade_bytes`` (format auto-detected; dataset rows as samples) -> verdict.

Cases come from ``../shared/conformance/`` (found relative to the repository,
or via ``TRAJGRADE_SHARED``) and from every ``*.jsonl`` in the directories
listed in ``TRAJGRADE_EXTRA_CASES`` (``os.pathsep``-separated). Test ids are
the cases' ``source`` strings. Each upstream family (``family_*.py``) knows
how its users write configs and traces and what its expectations mean.
"""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from trajgrade.config import compile_suite, decode_config
from trajgrade.errors import ConfigError
from trajgrade.pipeline import grade_bytes

HERE = Path(__file__).resolve()
SHARED = Path(os.environ.get("TRAJGRADE_SHARED", HERE.parents[3] / "shared"))
#: Upstream case files this release implements.
SUITES = (
    "vally.jsonl",
    "agentv.jsonl",
    "letta-evals.jsonl",
    "aigo-function-call-coverage.jsonl",
)
#: grader field of a case -> the family module that knows its upstream.
FAMILIES = {
    **dict.fromkeys(
        (
            "tool-calls",
            "token-budget",
            "tool-call-count",
            "turn-count",
            "error-count",
            "wall-time",
        ),
        "vally",
    ),
    "tool_trajectory": "agentv",
    "letta_evals.tool": "letta",
    "letta_evals.extractor": "letta",
    "function_call_coverage": "aigo",
}


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
                params.append(pytest.param(case, id=case["source"]))
    return params


CASES = _cases()


def test_shared_cases_are_present() -> None:
    """The shared conformance files are found, so the parametrised run is not empty."""
    for name in SUITES:
        assert (SHARED / "conformance" / name).exists(), (
            f"set TRAJGRADE_SHARED (looked in {SHARED})"
        )
    assert len(CASES) >= 238


@pytest.mark.parametrize("case", CASES)
def test_conformance(case: dict[str, Any]) -> None:
    """trajgrade gives the upstream's verdict for this case."""
    family = FAMILIES.get(case["grader"])
    assert family is not None, f"no conformance family knows grader {case['grader']!r}"
    fam = importlib.import_module(f"tests.conformance.family_{family}")
    try:
        suite = compile_suite(decode_config(fam.config_text(case), name="case.yaml"))
    except ConfigError as exc:
        fam.check_config_error(case, exc)
        return
    result = grade_bytes(
        suite, fam.trace_bytes(case), source="case", samples=fam.samples(case)
    )
    fam.check(case, result)
