"""mini-swe-agent trajectories: the real replayed run, then edge cases."""

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

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "mini-swe-agent"
RUN = "mini-swe-agent_github_issue_replay.traj.json"


def _sources_count() -> int:
    """The fixture's tool calls, from its SOURCES.md row."""
    for row in (FIXTURES / "SOURCES.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) == 10 and cells[0] == f"`mini-swe-agent/{RUN}`":
            m = re.match(r"(\d+) \(", cells[7])
            assert m is not None
            return int(m[1])
    raise AssertionError(RUN)


def _raw() -> bytes:
    return raw(FIXTURES / RUN)


def _decode(
    data: bytes, chunks: list[int] | None = None
) -> tuple[list[Event], list[InputError]]:
    return decode(data, fmt="mini-swe-agent", source="m.json", chunks=chunks)


def _read(data: bytes, chunks: list[int] | None = None) -> list[Event]:
    events, errors = _decode(data, chunks)
    assert not errors, errors
    return events


def test_tool_calls_match_sources_and_pair_by_adjacency() -> None:
    """Each fenced block is a bash call, answered by the next user message."""
    events = _read(_raw())
    calls = of(events, ToolCall)
    assert len(calls) == _sources_count()
    assert calls[1].args == {"command": "ls -la"}
    steps = [e for e in events if isinstance(e, ToolCall | ToolResult)]
    assert [type(e) for e in steps] == [ToolCall, ToolResult] * len(calls)


def test_return_codes_are_errors_and_the_submission_ends_the_run() -> None:
    """Non-zero <returncode> is an error; the final output is the trace's result."""
    events = _read(_raw())
    results = of(events, ToolResult)
    assert [r.is_error for r in results] == [True] + [False] * 6 + [True, False, None]
    end = events[-1]
    assert isinstance(end, TraceEnd) and end.is_error is None
    assert end.result == results[-1].result and end.result.startswith("diff --git")
    assert [t.step for t in of(events, TurnStart)] == [0]
    assert not of(events, Usage)


def test_random_chunks_give_the_same_events() -> None:
    """Random chunk boundaries give the events of reading the document whole."""
    data = _raw()
    whole = _read(data)
    rng = random.Random(3)
    for _ in range(10):
        chunks: list[int] = []
        while sum(chunks) < len(data):
            chunks.append(rng.randint(1, 1 << rng.randint(1, 12)))
        assert _read(data, chunks) == whole


def test_truncated_run_is_reported_and_earlier_steps_kept() -> None:
    """A run cut mid-message is reported with file and trace; earlier steps stay."""
    data = _raw()
    cut = data[: data.index(b"ls -la tests/")]
    events, errors = _decode(cut)
    assert len(errors) == 1
    assert (errors[0].location.file, errors[0].trace_id) == ("m.json", "m.json")
    assert len(of(events, ToolCall)) == 2
    assert len(of(events, ToolResult)) == 2


def test_odd_return_codes_and_costs_are_no_status() -> None:
    """A ``<returncode>`` of thousands of digits (``int`` refused it: a
    reader failure before) says nothing about the call; a cost that is not
    a number (``true``) is no cost."""
    block = "```mswea_bash_command\nls\n```"
    doc = {
        "info": {"model_stats": {"instance_cost": True}},
        "messages": [
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": block},
            {"role": "user", "content": f"<returncode>{'1' * 5000}</returncode>"},
        ],
    }
    events, errors = _decode(json.dumps(doc).encode())
    assert errors == []
    (result,) = of(events, ToolResult)
    assert result.is_error is None
    assert not of(events, Usage)


def test_wrapper_info_format_errors_and_bad_messages() -> None:
    """The saved-run wrapper gives cost and outcome; 0 or 2 blocks are no call."""
    block = "```mswea_bash_command\nls\n```"
    doc = {
        "info": {
            "exit_status": "LimitsExceeded",
            "submission": "",
            "model_stats": {"instance_cost": 0.5, "api_calls": 3},
        },
        "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": f"{block}\n{block}"},
            {"role": "user", "content": "Please always provide EXACTLY ONE action"},
            {"content": "no role"},
        ],
        "trajectory_format": "mini-swe-agent-1",
    }
    events, errors = _decode(json.dumps(doc, indent=2).encode())
    assert [(e.location.field, e.trace_id) for e in errors] == [
        ("messages[4].role", "m.json")
    ]
    two = f"{block}\n{block}"
    assert events == [
        Message(trace_id="m.json", role="system", text="s"),
        TurnStart(trace_id="m.json", step=0, source="user"),
        Message(trace_id="m.json", role="user", text="task"),
        Message(trace_id="m.json", role="assistant", text=two),
        Message(
            trace_id="m.json",
            role="user",
            text="Please always provide EXACTLY ONE action",
        ),
        Usage(trace_id="m.json", cost_usd=0.5),
        TraceEnd(trace_id="m.json", result="", is_error=True),
    ]


@pytest.mark.parametrize(
    "doc",
    [
        [{"role": "assistant", "content": None, "tool_calls": []}],  # OpenAI chat
        [{"type": "message", "role": "user", "content": "x"}],  # OpenResponses
        {"messages": [{"role": "user", "content": "x"}]},  # openai-chat document
        [{"task_id": 1, "traj": []}],  # tau-bench
        [{"id": 0, "timestamp": "t", "source": "user", "action": "message"}],
    ],
)
def test_does_not_claim_other_documents(doc: object) -> None:
    """Documents of other formats are not taken for a mini-swe-agent run."""
    data = json.dumps(doc, indent=2).encode()
    assert detect_document(data, final=True)[0] != "mini-swe-agent"


POLICY = """\
graders:
  - type: tool-calls
    config:
      required: [{name: "^bash$", command: "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}]
      disallowed: [{name: "^bash$", command: "rm -rf"}]
  - type: error-count
    config: {max: 1, include_tool_errors: true}
"""


@pytest.mark.slow
def test_cli_grades_a_mini_swe_agent_run_end_to_end(run_cli, tmp_path: Path) -> None:
    """`trajgrade grade` detects the run and grades its calls and failed commands."""
    cfg = tmp_path / "policy.yaml"
    cfg.write_text(POLICY, encoding="utf-8")
    proc = run_cli("grade", "-c", cfg, FIXTURES / RUN)
    assert proc.returncode == 1, proc.stderr
    finals = {
        v["grader"]: v["outcome"]
        for v in map(json.loads, proc.stdout.splitlines())
        if v["final"]
    }
    assert finals == {"tool-calls": "pass", "error-count": "fail"}
