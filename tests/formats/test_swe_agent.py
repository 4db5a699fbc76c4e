"""SWE-agent .traj documents: the real 0.x and 1.x runs, then edge cases."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from tests.formats._decode import decode, of, raw

from trajgrade.errors import InputError
from trajgrade.events import (
    Event,
    Message,
    ToolCall,
    ToolResult,
    TraceEnd,
    TurnStart,
    Usage,
)
from trajgrade.formats import detect_document

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "swe-agent"
V0 = "sweagent_gpt4_pydicom-1458.traj.gz"
V1 = "sweagent_v1_function_calling_test-repo.traj"


def _provenance() -> dict[str, int]:
    """fixture name -> tool calls, from its SOURCES.md rows."""
    counts: dict[str, int] = {}
    copied: dict[str, str] = {}
    for row in (FIXTURES / "SOURCES.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) == 10 and (m := re.match(r"(\d+) \(", cells[7])):
            counts[cells[0].strip("`")] = int(m[1])
        elif len(cells) == 2 and cells[0].startswith("`") and "/" not in cells[0]:
            copied[cells[0].strip("`")] = cells[1].strip("`")
    return {fixture: counts[origin] for fixture, origin in copied.items()}


SOURCES = _provenance()


def _raw(name: str) -> bytes:
    return raw(FIXTURES / name)


def _decode(
    data: bytes, chunks: list[int] | None = None
) -> tuple[list[Event], list[InputError]]:
    return decode(data, fmt="swe-agent", source="run.traj", chunks=chunks)


def _read(data: bytes, chunks: list[int] | None = None) -> list[Event]:
    events, errors = _decode(data, chunks)
    assert not errors, errors
    return events


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_tool_calls_match_sources(name: str) -> None:
    """Each fixture is detected and gives the tool-call count of SOURCES.md."""
    assert len(of(_read(_raw(name)), ToolCall)) == SOURCES[name]


def test_v0_actions_pair_by_adjacency_and_submit_gets_the_submission() -> None:
    """0.x actions are calls named by their command; the next user message is the result."""
    events = _read(_raw(V0))
    calls = of(events, ToolCall)
    assert [c.name for c in calls][:3] == ["create", "edit", "python"]
    assert calls[0].args == {"command": "create reproduce_bug.py\n"}
    assert all(c.call_id is None for c in calls)
    steps = [e for e in events if isinstance(e, ToolCall | ToolResult)]
    # call, result, call, result, …; submit's result is the submission.
    assert [type(e) for e in steps] == [ToolCall, ToolResult] * 12
    assert all(r.name == c.name for c, r in zip(steps[::2], steps[1::2], strict=False))
    assert calls[-1].name == "submit"
    assert steps[-1].result == events[-1].result


def test_v1_tool_calls_pair_by_id_with_parsed_arguments() -> None:
    """1.x tool_calls carry ids and JSON-string arguments; tool messages answer them."""
    events = _read(_raw(V1))
    calls = of(events, ToolCall)
    results = of(events, ToolResult)
    assert [r.call_id for r in results] == [c.call_id for c in calls]
    assert [r.name for r in results] == [c.name for c in calls]
    assert calls[0].args == {"file_name": "missing_colon.py"}
    assert calls[0].args_raw == '{"file_name":"missing_colon.py"}'


@pytest.mark.parametrize(
    ("name", "tokens", "cost"),
    [(V0, (122612, 1369), 1.26719), (V1, (7141, 243), 0.019520000000000006)],
)
def test_run_totals_are_one_usage_and_the_run_ends(
    name: str, tokens: tuple[int, int], cost: float
) -> None:
    """model_stats is one usage event; the submission ends the trace; one turn."""
    events = _read(_raw(name))
    (usage,) = of(events, Usage)
    assert (usage.input_tokens, usage.output_tokens, usage.cost_usd) == (*tokens, cost)
    assert [t.step for t in of(events, TurnStart)] == [0]
    end = events[-1]
    assert isinstance(end, TraceEnd) and end.is_error is False
    assert "diff --git" in end.result
    assert {e.trace_id for e in events} == {"run.traj"}


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_random_chunks_give_the_same_events(name: str) -> None:
    """Random chunk boundaries give the events of reading the document whole."""
    data = _raw(name)
    whole = _read(data)
    rng = random.Random(name)
    for _ in range(5):
        chunks: list[int] = []
        while sum(chunks) < len(data):
            chunks.append(rng.randint(1, 1 << rng.randint(1, 14)))
        assert _read(data, chunks) == whole


def test_truncated_document_is_reported_and_what_was_read_is_kept() -> None:
    """A .traj cut inside history is reported with file and trace; earlier steps stay."""
    data = _raw(V1)
    cut = data[: data.index(b"call_DVnbJcFrvwPsrPt3KfIMf7OH") + 5]
    events, errors = _decode(cut)
    assert len(errors) == 1
    err = errors[0]
    assert (err.location.file, err.trace_id) == ("run.traj", "run.traj")
    assert "not valid JSON" in str(err)
    assert len(of(events, ToolCall)) == 2
    assert isinstance(events[-1], TraceEnd) and events[-1].is_error is None


def test_demos_feedback_bad_entries_and_failed_exit() -> None:
    """Demos are skipped, later user text is a message, bad entries are located."""
    doc = {
        "environment": "swe_main",
        "trajectory": [{"action": "ls", "observation": "x"}],
        "history": [
            {"role": "user", "content": "demo", "is_demo": True},
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": "no action here", "action": ""},
            {"role": "user", "content": "format error, try again"},
            {"content": "no role"},
        ],
        "info": {"exit_status": "exit_format", "model_stats": {}},
    }
    events, errors = _decode(json.dumps(doc, indent=2).encode())
    assert [(e.location.field, e.trace_id) for e in errors] == [
        ("history[4].role", "run.traj")
    ]
    assert events == [
        TurnStart(trace_id="run.traj", step=0, source="user"),
        Message(trace_id="run.traj", role="user", text="task"),
        Message(trace_id="run.traj", role="assistant", text="no action here"),
        Message(trace_id="run.traj", role="user", text="format error, try again"),
        Usage(trace_id="run.traj"),
        TraceEnd(trace_id="run.traj", is_error=True),
    ]


def test_a_cost_that_is_not_a_number_is_no_cost() -> None:
    """``instance_cost: true`` was read as a cost of 1.0 (bool is an int)."""
    doc = {
        "trajectory": [],
        "history": [{"role": "user", "content": "task"}],
        "info": {"model_stats": {"instance_cost": True, "tokens_sent": 5}},
    }
    events, errors = _decode(json.dumps(doc).encode())
    assert errors == []
    assert of(events, Usage) == [Usage(trace_id="run.traj", input_tokens=5)]


@pytest.mark.parametrize(
    "doc",
    [
        {"messages": [{"role": "user", "content": "x"}]},  # openai-chat
        {"info": {}, "messages": [{"role": "user"}], "trajectory_format": "m"},  # mini
        {"schema_version": "ATIF-v1.5", "steps": [{"step_id": 1}]},  # ATIF
        {"trajectory": [[{"message_type": "user_message"}]]},  # letta-like
        [{"action": "run", "observation": "run"}],  # an array
    ],
)
def test_does_not_claim_other_documents(doc: object) -> None:
    """Documents of other formats are not taken for a .traj."""
    data = json.dumps(doc, indent=2).encode()
    assert detect_document(data, final=True)[0] != "swe-agent"


POLICY = """\
graders:
  - type: tool-calls
    config:
      required: ["^submit$"]
  - type: token-budget
    config: {max: 100000}
"""


@pytest.mark.slow
def test_cli_grades_traj_files_end_to_end(run_cli, tmp_path: Path) -> None:
    """`trajgrade grade` detects both .traj versions and grades each as one run."""
    cfg = tmp_path / "policy.yaml"
    cfg.write_text(POLICY, encoding="utf-8")
    v0 = tmp_path / "v0.traj"
    v0.write_bytes(_raw(V0))
    proc = run_cli("grade", "-c", cfg, v0, FIXTURES / V1)
    assert proc.returncode == 1, proc.stderr
    finals = {
        (Path(v["trace_id"]).name, v["grader"]): v["outcome"]
        for v in map(json.loads, proc.stdout.splitlines())
        if v["final"]
    }
    assert finals == {
        ("v0.traj", "tool-calls"): "pass",
        ("v0.traj", "token-budget"): "fail",
        (V1, "tool-calls"): "fail",
        (V1, "token-budget"): "pass",
    }
