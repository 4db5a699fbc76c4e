"""rate-limit: sliding windows, per-trace limits, refused calls, event time,
config errors, checkpoints, and a real recorded session."""

from __future__ import annotations

import pytest
from tests.graders._guard import drive, grader, recorded

from trajgrade.errors import ConfigError, ConfigErrors
from trajgrade.events import ToolCall, TraceEnd
from trajgrade.verdicts import Outcome


def bash(ts: float | None, cid: str = "c") -> ToolCall:
    return ToolCall(
        trace_id="t", name="Bash", call_id=cid, args={"command": "ls"}, ts=ts
    )


def test_the_call_that_exceeds_the_window_is_judged_and_the_trace_fails_sealed() -> (
    None
):
    g = grader("rate-limit", "{match: Bash, max: 2, window: 60s}")
    run = drive(
        g,
        [
            bash(0, "a"),
            bash(10, "b"),
            bash(20, "c"),
            bash(70, "d"),
            TraceEnd(trace_id="t"),
        ],
    )
    assert [(c.call_id, j.rule) for _, c, j in run.judged] == [("c", "max")]
    ((i, d),) = run.decisions
    assert i == 2 and d.outcome is Outcome.FAIL and not d.final
    assert run.final.outcome is Outcome.FAIL and run.final.final
    assert "would be matching call 3 within 60s" in run.final.evidence


def test_window_is_half_open_and_refused_calls_are_not_counted() -> None:
    """(t - window, t]: a call exactly one window later is free; a refused
    retry does not keep the window full."""
    g = grader("rate-limit", "{match: Bash, max: 1, window: 10s}")
    run = drive(
        g, [bash(0, "a"), bash(5, "b"), bash(6, "c"), bash(10, "d"), bash(19, "e")]
    )
    assert [c.call_id for _, c, _ in run.judged] == ["b", "c", "e"]


def test_other_tools_do_not_count() -> None:
    g = grader("rate-limit", "{match: {name: Bash, command: curl}, max: 1}")
    curl = ToolCall(trace_id="t", name="Bash", args={"command": "curl x"})
    ls = ToolCall(trace_id="t", name="Bash", args={"command": "ls"})
    read = ToolCall(trace_id="t", name="Read", args={"path": "a"})
    run = drive(g, [curl, ls, read, ls, curl])
    assert [i for i, _, _ in run.judged] == [4]


def test_without_window_the_limit_is_per_trace() -> None:
    g = grader("rate-limit", "{match: Bash, max: 3}")
    run = drive(g, [bash(t * 3600.0, str(t)) for t in range(5)])
    assert [c.call_id for _, c, _ in run.judged] == ["3", "4"]
    assert run.final.metadata == {"matching_calls": 5, "violations": 2, "max": 3}


def test_calls_without_timestamps_take_the_latest_one_and_time_never_runs_back() -> (
    None
):
    g = grader("rate-limit", "{match: Bash, max: 2, window: 5s}")
    # No ts at all: per trace, never looser.
    assert [i for i, _, _ in drive(g, [bash(None)] * 4).judged] == [2, 3]
    # 100 then an earlier ts 1: counted at 100, inside the window.
    assert [i for i, _, _ in drive(g, [bash(100), bash(None), bash(1)]).judged] == [2]


def test_state_holds_at_most_max_timestamps_and_survives_checkpoints() -> None:
    g = grader("rate-limit", "{match: Bash, max: 3, window: 1m}")
    events = [bash(float(t)) for t in range(0, 400, 7)]
    plain, restarted = drive(g, events), drive(g, events, checkpoint_every=3)
    assert plain.judged == restarted.judged and plain.final == restarted.final
    assert len(plain.state.times) <= 3


@pytest.mark.parametrize(
    ("config", "field", "text"),
    [
        ("{match: Bash, max: 2, window: 60}", "window", "a bare number has no unit"),
        ("{match: Bash, max: 2, window: soon}", "window", "positive duration"),
        (
            "{match: {name: Bash, result: x}, max: 2}",
            "match.result",
            "before its result exists",
        ),
        ("{match: {name: Bash, min_count: 2}, max: 2}", "match.min_count", "required"),
        ("{match: '(', max: 2}", "match", ""),
        ("{match: Bash, max: -1}", "max", ""),
    ],
)
def test_config_errors_name_the_field(config: str, field: str, text: str) -> None:
    with pytest.raises((ConfigError, ConfigErrors)) as info:
        grader("rate-limit", config)
    assert f"config.{field}" in str(info.value) and text in str(info.value)


def test_real_codex_session_is_stopped_at_its_eleventh_command_in_a_minute() -> None:
    """codex/localpush_v0.104_redacted_118_calls.jsonl: real rollout with
    timestamps; at most 10 exec_command calls per 60 s."""
    events = recorded("codex/localpush_v0.104_redacted_118_calls.jsonl")
    g = grader("rate-limit", "{match: {kind: shell}, max: 10, window: 60s}")
    run = drive(g, events)
    first = run.judged[0][1]
    assert (
        first.call_id == "call_2A0mKIgMZozXEMIoUUcbaOji"
        and first.name == "exec_command"
    )
    calls = [e for e in events if isinstance(e, ToolCall) and e.name == "exec_command"]
    k = calls.index(first)
    assert first.ts is not None and calls[k - 10].ts is not None
    assert first.ts - calls[k - 10].ts < 60  # ten earlier ones within the minute
    assert run.final.outcome is Outcome.FAIL


def test_with_on_fail_abort_only_the_call_that_failed_the_trace_is_judged() -> None:
    """The engine aborts the run at that call and refuses every later one."""
    g = grader("rate-limit", "{match: Bash, max: 1}", on_fail="abort")
    run = drive(g, [bash(None, "a"), bash(None, "b"), bash(None, "c")])
    assert [c.call_id for _, c, _ in run.judged] == ["b"]
    assert run.final.metadata["violations"] == 2
