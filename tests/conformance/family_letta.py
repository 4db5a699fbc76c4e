"""letta-evals cases: a suite file's `graders:` mapping; trace = Letta turns.

Tool-grader cases (``letta_evals.tool``) run as written: the config is the
metric entry of a letta-evals suite, the trace is the trajectory (a list of
turns of Letta messages, one JSON line), the sample is the dataset row of
trace ``case`` (with the case's ``agent_state``).

Extractor cases (``letta_evals.extractor``) call an extractor directly
upstream; trajgrade runs extractors only inside a ``letta-tool`` grader, so
each runs through one (function ``ascii_printable_only``, which needs no
ground truth; its score is not checked) and the extracted value is read from
``metadata.submission``. letta-evals' grader pipeline decides what is
observable that way, and the checks follow it faithfully:

* an empty trajectory (every turn empty) never reaches the extractor
  upstream: the grader says ``Empty trajectory …`` with submission ``""``,
  whatever the extractor would return (``"{}"`` for ``tool_arguments``);
* an extracted ``""`` is an empty submission: ``Empty submission …``, and
  the function is not called;
* otherwise the submission is the extracted text.

Errors: upstream raises while constructing the grader (ValueError,
ImportError, …) or, for a missing required ``extractor_config`` key, while
extracting (KeyError); trajgrade reports both when the suite is compiled, as
a ConfigError. Errors that depend on the sample (pydantic ValidationError of
``Sample``, ``memory_block`` without ``agent_state``) concern one trace, so
they are that trace's ``error`` verdict carrying upstream's text.
"""

from __future__ import annotations

import json
import math
from typing import Any

import yaml

from trajgrade.errors import ConfigError
from trajgrade.pipeline.whole import GradeResult
from trajgrade.verdicts import Outcome, Verdict

#: upstream exception types trajgrade reports as a ConfigError at load time.
LOAD_TIME = frozenset(
    ("ValueError", "ImportError", "ModuleNotFoundError", "TypeError", "KeyError")
)
#: The grading function extractor cases run through.
PROBE_FUNCTION = "ascii_printable_only"


def _metric(case: dict[str, Any]) -> dict[str, Any]:
    if case["grader"] == "letta_evals.tool":
        return dict(case["config"])
    return {"kind": "tool", "function": PROBE_FUNCTION, **case["config"]}


def config_text(case: dict[str, Any]) -> str:
    """The config as a letta-evals suite file (its other keys are ignored)."""
    suite = {
        "name": "conformance",
        "dataset": "dataset.jsonl",
        "target": {"kind": "letta_agent", "agent_file": "agent.af"},
        "graders": {"metric": _metric(case)},
    }
    return yaml.safe_dump(suite, sort_keys=False, allow_unicode=True)


def trace_bytes(case: dict[str, Any]) -> bytes:
    """The trajectory as one JSON line (a case without one: no messages)."""
    trace = case["trace"] if case["trace"] is not None else []
    return (json.dumps(trace) + "\n").encode()


def samples(case: dict[str, Any]) -> dict[str, Any]:
    """The dataset row of trace ``case``, with the case's agent_state."""
    row = dict(case.get("sample") or {})
    if case.get("agent_state") is not None:
        row["agent_state"] = case["agent_state"]
    return {"case": row}


def _error_expectation(expect: dict[str, Any]) -> tuple[list[str], str] | None:
    """(upstream error types, text) the case expects, if it expects an error."""
    if expect.get("config_error"):
        types = expect.get("error_type_any_of") or [expect["error_type"]]
        return types, expect.get("error_contains", "")
    if "error" in expect:
        err = expect["error"]
        return [err["error_type"]], err["error_contains"]
    return None


def check_config_error(case: dict[str, Any], exc: ConfigError) -> None:
    """A load-time error stands for upstream's constructor or KeyError."""
    expected = _error_expectation(case["expect"])
    assert expected is not None, f"unexpected config error: {exc}"
    types, text = expected
    assert LOAD_TIME.intersection(types), (
        f"upstream raises {types} per sample, but trajgrade failed at load: {exc}"
    )
    assert text in str(exc), exc


def _final(result: GradeResult) -> Verdict:
    assert not result.errors, result.errors
    finals = [v for v in result.verdicts if v.final]
    assert len(finals) == 1, result.verdicts
    return finals[0]


def check(case: dict[str, Any], result: GradeResult) -> None:
    """The final verdict says what letta-evals says for this case."""
    expect = case["expect"]
    verdict = _final(result)
    meta = verdict.metadata
    expected_error = _error_expectation(expect)
    if expected_error is not None:
        assert verdict.outcome is Outcome.ERROR, f"expected an error, got {verdict}"
        assert expected_error[1] in verdict.evidence, verdict.evidence
        return
    assert verdict.outcome is not Outcome.ERROR, verdict
    if "extracted" in expect:
        if not any(case["trace"]):
            assert meta["submission"] == "", meta
            assert verdict.evidence.startswith("Empty trajectory"), verdict
        elif expect["extracted"] == "":
            assert meta["submission"] == "", meta
            assert verdict.evidence.startswith("Empty submission"), verdict
        else:
            assert meta["submission"] == expect["extracted"], meta
        return
    assert verdict.passed is expect["pass"], verdict
    assert math.isclose(verdict.score, expect["score"], abs_tol=1e-9), verdict
    if "submission" in expect:
        assert meta["submission"] == expect["submission"], meta
    if "rationale" in expect:
        assert meta["rationale"] == expect["rationale"], meta
        assert verdict.evidence == expect["rationale"], verdict
    if "rationale_contains" in expect:
        assert expect["rationale_contains"] in verdict.evidence, verdict
    for key in expect.get("metadata_keys", []):
        assert key in meta, (key, meta)
    for key in ("turns_passed", "turns_total", "per_turn_scores"):
        if key in expect:
            assert meta[key] == expect[key], (key, meta)
