"""`trajgrade run --decisions`: the guard decisions of a wrapped agent, one
JSON line each, to a file or (with the agent's output elsewhere) stdout."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from tests.wrapper.test_wrapper import SID, Run, _init, _result, _tool_use

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.slow

STEPS = [
    ["line", _init()],
    ["line", _tool_use("t1", "cat /etc/hostname")],
    ["line", _tool_use("t2", "cat /etc/hostname")],  # the retry
    ["line", _tool_use("t3", "ls")],
    ["line", _result()],
]


def test_every_forbidden_call_is_written_to_the_decisions_file(tmp_path: Path) -> None:
    """The retry gets its own decision though the verdict was final at t1;
    the allowed call gets none. The file is appended to by a second run."""
    path = tmp_path / "d.jsonl"
    args = ("--stop-on", "never", "--decisions", str(path))
    code, _, err = Run(tmp_path, STEPS, *args).complete()
    assert code == 1, err
    got = [json.loads(x) for x in path.read_text().splitlines()]
    assert [(d["type"], d["call_id"], d["action"], d["rule"]) for d in got] == [
        ("decision", "t1", "deny", "disallowed[0]"),
        ("decision", "t2", "deny", "disallowed[0]"),
    ]
    assert {(d["trace_id"], d["grader"], d["tool"]) for d in got} == {
        (SID, "no-hostname", "Bash")
    }
    Run(tmp_path, STEPS, *args).complete()
    assert len(path.read_text().splitlines()) == 4


def test_decisions_on_stdout_follow_their_verdict(tmp_path: Path) -> None:
    agent_out = tmp_path / "agent.jsonl"
    args = ("--agent-output", str(agent_out), "--verdicts", "-", "--decisions", "-")
    code, out, err = Run(tmp_path, STEPS, "--stop-on", "never", *args).complete()
    assert code == 1, err
    lines = [json.loads(x) for x in out.splitlines()]
    assert [(x.get("type", "verdict"), x.get("call_id")) for x in lines] == [
        ("verdict", None),
        ("decision", "t1"),
        ("decision", "t2"),
    ]


def test_decisions_on_stdout_need_the_agent_output_elsewhere(tmp_path: Path) -> None:
    code, _, err = Run(tmp_path, [], "--decisions", "-").complete()
    assert code == 2
    assert "to get decisions on stdout" in err


def test_an_unwritable_decisions_path_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "missing" / "d.jsonl"
    code, _, err = Run(tmp_path, STEPS, "--decisions", str(bad)).complete()
    assert code == 2
    assert "cannot write guard decisions" in err
    assert str(bad) in err
