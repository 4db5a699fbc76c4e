"""loop: identical calls in a row or within the last calls, A/B ping-pong,
fingerprints, config errors, checkpoints, and a real recorded session."""

from __future__ import annotations

import pytest
from tests.graders._guard import drive, grader, recorded

from trajgrade.errors import ConfigError, ConfigErrors
from trajgrade.events import ToolCall
from trajgrade.graders.rules._shared import fingerprint
from trajgrade.verdicts import Outcome


def c(name: str, cid: str = "x", **args: object) -> ToolCall:
    return ToolCall(trace_id="t", name=name, call_id=cid, args=dict(args) or None)


def test_the_call_completing_n_in_a_row_is_judged_and_every_further_repeat() -> None:
    g = grader("loop", "{repeats: 3}")
    events = [
        c("ls", "1"),
        c("ls", "2"),
        c("ls", "3"),
        c("ls", "4"),
        c("pwd", "5"),
        c("ls", "6"),
    ]
    run = drive(g, events)
    assert [(e.call_id, j.rule) for _, e, j in run.judged] == [
        ("3", "repeats"),
        ("4", "repeats"),
    ]
    ((i, d),) = run.decisions
    assert i == 2 and not d.final and d.outcome is Outcome.FAIL
    assert run.final.outcome is Outcome.FAIL and "2 looping calls" in run.final.evidence


def test_fingerprint_is_name_and_canonical_arguments() -> None:
    a = ToolCall(name="Read", call_id="1", args={"path": "a", "limit": 5}, ts=1)
    b = ToolCall(name="Read", call_id="2", args={"limit": 5, "path": "a"}, ts=9)
    assert fingerprint(a) == fingerprint(b)
    assert fingerprint(a) != fingerprint(
        ToolCall(name="Read", args={"path": "b", "limit": 5})
    )
    assert fingerprint(a) != fingerprint(
        ToolCall(name="Grep", args={"path": "a", "limit": 5})
    )
    raw = ToolCall(name="apply_patch", args_raw="*** Begin Patch")
    assert fingerprint(raw) == fingerprint(
        ToolCall(name="apply_patch", args_raw="*** Begin Patch")
    )


def test_within_counts_repeats_among_the_last_calls() -> None:
    g = grader("loop", "{repeats: 3, within: 5}")
    seq = ["a", "b", "a", "c", "a", "d", "e", "f", "a", "a"]
    run = drive(g, [c("Bash", str(i), command=x) for i, x in enumerate(seq)])
    # a at 0,2,4 -> 3 in the last 5 at index 4; at 9 only 8,9 (+4 fell out).
    assert [e.call_id for _, e, _ in run.judged] == ["4"]
    assert len(run.state.recent) == 5


def test_ping_pong_judges_the_call_completing_the_alternation() -> None:
    g = grader("loop", "{ping_pong: 4}")
    seq = ["a", "b", "a", "a", "b", "a", "b", "a", "c"]
    run = drive(g, [c("Bash", str(i), command=x) for i, x in enumerate(seq)])
    assert [(e.call_id, j.rule) for _, e, j in run.judged] == [
        ("6", "ping_pong"),
        ("7", "ping_pong"),
    ]


def test_match_makes_other_calls_invisible() -> None:
    g = grader("loop", "{repeats: 2, match: Bash}")
    run = drive(
        g, [c("Bash", "1", command="x"), c("Read", "2"), c("Bash", "3", command="x")]
    )
    assert [e.call_id for _, e, _ in run.judged] == ["3"]


def test_checkpoints_change_nothing() -> None:
    g = grader("loop", "{repeats: 3, within: 6, ping_pong: 5}")
    seq = "ababababccacaccc"
    events = [c("Bash", str(i), command=x) for i, x in enumerate(seq)]
    plain, restarted = drive(g, events), drive(g, events, checkpoint_every=2)
    assert plain.judged == restarted.judged and plain.final == restarted.final


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ("{}", "repeats"),
        ("{repeats: 1}", "repeats"),
        ("{repeats: 4, within: 3}", "within"),
        ("{ping_pong: 6, within: 8}", "within"),
        ("{ping_pong: 3}", "ping_pong"),
        ("{repeats: 3, within: 100000}", "within"),
        ("{repeats: 3, match: {name: x, result: y}}", "match.result"),
    ],
)
def test_config_errors_name_the_field(config: str, field: str) -> None:
    with pytest.raises((ConfigError, ConfigErrors)) as info:
        grader("loop", config)
    assert f"config.{field}" in str(info.value)


def test_real_tau_bench_agent_is_stopped_reissuing_the_same_update() -> None:
    """openai-chat/tau-bench_gpt-4o_airline_subset.json.gz, task 13: gpt-4o
    sends the same update_reservation_flights call a third time."""
    events = recorded("openai-chat/tau-bench_gpt-4o_airline_subset.json.gz")
    g = grader("loop", "{repeats: 3, within: 10}")
    trace = [e for e in events if e.trace_id == "13/0"]
    run = drive(g, trace)
    (_, call, j), *_ = run.judged
    assert call.call_id == "call_oIHazX6yQrB8hUwl4cRilFKj"
    assert call.name == "update_reservation_flights" and j.rule == "repeats"
    same = [
        e
        for e in trace
        if isinstance(e, ToolCall) and fingerprint(e) == fingerprint(call)
    ]
    assert same.index(call) == 2  # the third identical call


def test_same_name_counts_one_tool_whatever_its_arguments() -> None:
    """`same: name`: five Bash calls in a row are a loop even when each runs
    another command; the default (`same: call`) sees five different calls."""
    commands = ["ls", "pwd", "ls -la", "cat a", "git status"]
    events = [c("Bash", str(i), command=x) for i, x in enumerate(commands)]
    by_name = drive(grader("loop", "{repeats: 5, same: name}"), events)
    ((_, last, ruling),) = by_name.judged
    assert last.call_id == "4" and ruling.rule == "repeats"
    assert ruling.reason == (
        "'Bash' command 'git status' in call 4 is the same tool 5 times in a row"
        " (repeats: 5)"
    )
    assert ruling.matched is not None
    assert (ruling.matched.field, ruling.matched.value) == ("command", "git status")
    assert by_name.final.outcome is Outcome.FAIL
    by_call = drive(grader("loop", "{repeats: 5}"), events)
    assert by_call.judged == [] and by_call.final.outcome is Outcome.PASS
    # Another tool breaks the run, as it does for identical calls.
    broken = [*events[:2], c("Read", "r", path="a"), *events[2:]]
    assert drive(grader("loop", "{repeats: 5, same: name}"), broken).judged == []


def test_same_takes_call_or_name_only() -> None:
    with pytest.raises(ConfigError, match="same"):
        grader("loop", "{repeats: 3, same: args}")
