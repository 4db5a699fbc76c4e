"""Letta trajectories: turn lists, flat lists, result rows, and the benchmark shape."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.formats._decode import feed_lines

from trajgrade import compile_suite, decode_config
from trajgrade.errors import InputError
from trajgrade.events import (
    AgentError,
    Event,
    Message,
    ToolCall,
    ToolResult,
    TraceEnd,
    TraceStart,
    TurnStart,
    Usage,
)
from trajgrade.formats import detect
from trajgrade.formats.letta import FORMAT, LettaReader
from trajgrade.pipeline.whole import grade_bytes
from trajgrade.verdicts import Outcome


def _feed(*records: object) -> tuple[list[Event], list[InputError], list[int] | None]:
    buf = b"".join(json.dumps(r).encode() + b"\n" for r in records)
    return feed_lines(LettaReader(source="l.jsonl", default_trace="l"), buf)


def _events(*records: object) -> list[Event]:
    events, errors, _ = _feed(*records)
    assert not errors, errors
    return events


def test_turn_lists_map_to_canonical_events() -> None:
    """Each turn list opens with turn_start; messages, calls and returns map across."""
    events = _events(
        [
            [
                {
                    "message_type": "user_message",
                    "date": "2026-01-01T00:00:00Z",
                    "content": "q",
                },
                {"message_type": "reasoning_message", "reasoning": "think"},
                {
                    "message_type": "tool_call_message",
                    "date": "2026-01-01T00:00:01Z",
                    "tool_call": {
                        "name": "search",
                        "arguments": '{"q": "x"}',
                        "tool_call_id": "c1",
                    },
                },
                {
                    "message_type": "tool_return_message",
                    "tool_call_id": "c1",
                    "tool_return": "boom",
                    "status": "error",
                },
            ],
            [{"message_type": "assistant_message", "content": "done"}],
        ]
    )
    assert events == [
        TurnStart(trace_id="l", step=0),
        Message(trace_id="l", ts=1767225600.0, role="user", text="q"),
        Message(trace_id="l", role="reasoning", text="think"),
        ToolCall(
            trace_id="l",
            ts=1767225601.0,
            name="search",
            call_id="c1",
            args={"q": "x"},
            args_raw='{"q": "x"}',
        ),
        ToolResult(trace_id="l", call_id="c1", result="boom", is_error=True),
        TurnStart(trace_id="l", step=1),
        Message(trace_id="l", role="assistant", text="done"),
        TraceEnd(trace_id="l"),
    ]


def test_tool_calls_list_wins_over_the_singular_tool_call() -> None:
    """Every entry of a non-empty tool_calls is a call; tool_call only when it is empty."""
    one = {"name": "a", "arguments": "{}", "tool_call_id": "c1"}
    two = {"name": "b", "arguments": "not json", "tool_call_id": "c2"}
    events = _events(
        [
            {
                "message_type": "tool_call_message",
                "tool_call": one,
                "tool_calls": [two, one],
            }
        ],
        [{"message_type": "tool_call_message", "tool_call": one, "tool_calls": []}],
    )
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert [(c.trace_id, c.name, c.args, c.args_raw) for c in calls] == [
        ("l", "b", None, "not json"),
        ("l", "a", {}, "{}"),
        ("l#2", "a", {}, "{}"),
    ]


def test_content_parts_are_joined_with_one_space() -> None:
    """List content is its text parts joined by a space; user images are skipped."""
    events = _events(
        [
            {
                "message_type": "user_message",
                "content": [
                    {"type": "image", "source": {}},
                    {"type": "text", "text": "look"},
                ],
            },
            {
                "message_type": "assistant_message",
                "content": [
                    {"type": "text", "text": "a"},
                    {"type": "text", "text": "b"},
                ],
            },
        ]
    )
    assert [e.text for e in events if isinstance(e, Message)] == ["look", "a b"]


def test_flat_message_list_is_one_turn() -> None:
    """A list of messages (not of turns) is a trajectory of one turn."""
    events = _events([{"message_type": "assistant_message", "content": "hi"}])
    assert [type(e) for e in events] == [TurnStart, Message, TraceEnd]


def test_object_records_name_their_trace() -> None:
    """trace_id, then id, then sample_id names the trace; records without one are numbered."""
    events = _events(
        {"sample_id": 7, "id": "run-1", "trajectory": []},
        {"sample_id": 7, "trajectory": []},
        [],
        [],
    )
    assert [e.trace_id for e in events] == ["run-1", "7", "l#3", "l#4"]


def test_result_rows_carry_agent_state_and_usage() -> None:
    """A letta-evals result row gives trace_start(agent_state) and its usage statistics."""
    state = {"blocks": [{"label": "human", "value": "Sarah"}]}
    usage = {
        "message_type": "usage_statistics",
        "prompt_tokens": 100,
        "completion_tokens": 20,
        "prompt_tokens_details": {"cached_tokens": 30},
        "completion_tokens_details": {"reasoning_tokens": 5},
    }
    events = _events(
        {
            "sample_id": "s1",
            "trajectory": [[]],
            "agent_state": state,
            "agent_usage": [usage],
            "grades": {},
        }
    )
    assert events == [
        TraceStart(trace_id="s1", metadata={"agent_state": state}),
        TurnStart(trace_id="s1", step=0),
        Usage(
            trace_id="s1",
            input_tokens=100,
            output_tokens=20,
            cache_read_tokens=30,
            reasoning_tokens=5,
        ),
        TraceEnd(trace_id="s1"),
    ]


def test_stream_messages_map_or_are_skipped() -> None:
    """error_message is an error event; stop_reason/ping are skipped; other Letta
    messages stay messages so an approval-only trajectory is not empty."""
    events = _events(
        [
            {
                "message_type": "error_message",
                "error_type": "llm_error",
                "message": "rate limited",
            },
            {"message_type": "stop_reason", "stop_reason": "end_turn"},
            {"message_type": "ping"},
            {
                "message_type": "approval_response_message",
                "approve": False,
                "reason": "no",
            },
            {"message_type": "hidden_reasoning_message", "hidden_reasoning": None},
        ]
    )
    assert events[1:-1] == [
        AgentError(trace_id="l", message="rate limited", code="llm_error"),
        Message(trace_id="l", role="approval_response", text="no"),
        Message(trace_id="l", role="reasoning", text=""),
    ]


def test_bad_messages_are_located_errors_and_the_rest_is_read() -> None:
    """An unknown message_type or malformed content names its line, field and trace."""
    events, errors, lines = _feed(
        {
            "trace_id": "r",
            "trajectory": [
                [
                    {"message_type": "assistant_message", "content": "ok"},
                    {"message_type": "mystery"},
                ]
            ],
        },
        "not a trajectory",
        [[{"message_type": "assistant_message", "content": [{"type": "image"}]}]],
    )
    assert [str(e) for e in errors] == [
        "l.jsonl:1: trajectory[0][1].message_type: unknown Letta message_type 'mystery'; expected one of "
        "approval_request_message, approval_response_message, assistant_message, error_message, event_message, "
        "hidden_reasoning_message, ping, reasoning_message, stop_reason, summary_message, system_message, "
        "tool_call_message, tool_return_message, usage_statistics, user_message; fix the producer or the line",
        "l.jsonl:2: expected a Letta trajectory (a list of turns, or an object with `trajectory`), got str",
        "l.jsonl:3: [0][0].content[0]: an assistant content part must be a text part ({type: text, text}); fix the producer or the line",
    ]
    assert [e.trace_id for e in errors] == ["r", "l#2", "l#3"]
    assert [type(e) for e in events] == [
        TurnStart,
        Message,
        TraceEnd,
        TurnStart,
        TraceEnd,
    ]
    assert lines == [1, 1, 1, 3, 3]


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("message_type", {}, "message_type"),
        ("message_type", ["ping"], "message_type"),
        ("tool_call_id", [], "tool_call_id"),
        ("tool_call", {"name": "f", "tool_call_id": {}}, "tool_call.tool_call_id"),
    ],
    ids=["type-object", "type-array", "return-id", "call-id"],
)
def test_a_field_that_is_not_a_string_is_a_located_error(
    key: str, value: object, field: str
) -> None:
    """A ``message_type`` or call id that is not a string is an error at its
    line and field (the type raised TypeError, unhashable, before); the
    other messages of the trajectory and the next trajectory are read."""
    kind = "tool_return_message" if key == "tool_call_id" else "tool_call_message"
    bad = {"message_type": kind, "tool_return": "x", key: value}
    good = {"message_type": "assistant_message", "content": "ok"}
    events, errors, _ = _feed(
        {"trace_id": "r", "trajectory": [[good, bad, good]]},
        {"trace_id": "s", "trajectory": [[good]]},
    )
    (err,) = errors
    assert (err.location.line, err.location.field, err.trace_id) == (
        1,
        f"trajectory[0][1].{field}",
        "r",
    )
    assert "Please report" not in err.message
    assert events == [
        TurnStart(trace_id="r", step=0),
        Message(trace_id="r", role="assistant", text="ok"),
        Message(trace_id="r", role="assistant", text="ok"),
        TraceEnd(trace_id="r"),
        TurnStart(trace_id="s", step=0),
        Message(trace_id="s", role="assistant", text="ok"),
        TraceEnd(trace_id="s"),
    ]


def test_invalid_json_is_charged_to_its_trace_and_later_lines_are_read() -> None:
    """A broken line is a lost trajectory (its own or positional trace); the rest is read."""
    reader = LettaReader(source="x", default_trace="x")
    events, errors, lines = feed_lines(
        reader, b'[[{"mess\n{"trace_id": "r9", "traj\n[]\n', 7
    )
    assert "x:7: not valid JSON" in str(errors[0])
    assert [e.trace_id for e in errors] == ["x", "r9"]
    assert events == [TraceEnd(trace_id="x#3")] and lines == [9]


@pytest.mark.parametrize(
    ("record", "claimed"),
    [
        ([], True),
        ([[], []], True),
        ([[{"message_type": "user_message", "content": "q"}]], True),
        ([{"message_type": "assistant_message", "content": "a"}], True),
        ({"trace_id": "t", "trajectory": [[]]}, True),
        (
            [{"type": "message", "role": "user", "content": "hi"}],
            False,
        ),  # OpenResponses
        ({"trace_id": "t", "output": [{"role": "assistant"}]}, False),  # agentv
        ({"events": []}, False),  # vally
        ({"type": "tool_call", "name": "x"}, False),  # canonical
        ([[1]], False),
    ],
)
def test_sniff_claims_letta_shapes_only(record: object, claimed: bool) -> None:
    """Letta is a list of turns of message_type dicts (or holds one); nothing else."""
    assert FORMAT.sniff(record) is claimed


def test_detection_picks_letta_for_trajectories() -> None:
    """Auto-detection reads a turn list and a benchmark row as letta."""
    assert (
        detect(b'[[{"message_type": "assistant_message", "content": "x"}]]') == "letta"
    )
    assert detect(b'{"trace_id": "t", "trajectory": []}') == "letta"


# The shape of the benchmark corpus' letta.jsonl (bench/gen_traces.py to_letta):
# one turn, singular tool_call with a step_id, millisecond ISO dates.
BENCH_ROW: dict[str, Any] = {
    "trace_id": "tr-000000",
    "trajectory": [
        [
            {
                "message_type": "user_message",
                "id": "message-tr-000000-0001",
                "date": "2026-01-01T00:00:00.000Z",
                "content": "Increase the request timeout",
            },
            {
                "message_type": "reasoning_message",
                "id": "message-tr-000000-0002",
                "date": "2026-01-01T00:00:05.175Z",
                "reasoning": "write worker",
            },
            {
                "message_type": "tool_call_message",
                "id": "message-tr-000000-0003",
                "date": "2026-01-01T00:00:05.175Z",
                "step_id": "step-0",
                "tool_call": {
                    "name": "view",
                    "arguments": '{"path": "src/app/core/cache.py"}',
                    "tool_call_id": "call_000000_001",
                },
            },
            {
                "message_type": "tool_return_message",
                "id": "message-tr-000000-0004",
                "date": "2026-01-01T00:00:08.056Z",
                "step_id": "step-0",
                "tool_return": "     1\ttimeout = 30\n",
                "status": "success",
                "tool_call_id": "call_000000_001",
            },
            {
                "message_type": "assistant_message",
                "id": "message-tr-000000-0005",
                "date": "2026-01-01T00:00:09.000Z",
                "content": "Raised the timeout to 60s; tests pass.",
            },
        ]
    ],
}


def test_benchmark_corpus_rows_grade_end_to_end() -> None:
    """A letta.jsonl row of the benchmark corpus is one trace named by its trace_id."""
    suite = compile_suite(
        decode_config(
            "graders:\n"
            "  viewed: {kind: tool, function: contains, extractor: tool_arguments,"
            " extractor_config: {tool_name: view}}\n"
            "  answered: {kind: tool, function: contains}\n"
        )
    )
    data = (json.dumps(BENCH_ROW) + "\n").encode()
    sample = {"input": "Increase the request timeout", "ground_truth": "cache.py"}
    result = grade_bytes(suite, data, samples={"tr-000000": sample})
    assert not result.errors and not result.anomalies
    verdicts = {v.grader: v for v in result.verdicts}
    assert verdicts["viewed"].outcome is Outcome.PASS and verdicts["viewed"].early
    assert (
        verdicts["viewed"].metadata["submission"] == '{"path": "src/app/core/cache.py"}'
    )
    assert verdicts["answered"].outcome is Outcome.FAIL
    assert verdicts["answered"].ts == 1767225609.0


def test_a_real_letta_evals_results_file_is_read_with_its_calls() -> None:
    """letta-evals' streamed results rows ({"type": "result", "result": {...}}) give 5 traces, 5 calls."""
    import json as _json
    import subprocess as _sp
    import sys as _sys
    from pathlib import Path as _Path

    path = (
        _Path(__file__).parents[1]
        / "fixtures"
        / "letta"
        / "letta-evals_simple_tool_grader_oct2025.results.jsonl"
    )
    proc = _sp.run(
        [_sys.executable, "-m", "trajgrade", "stats", "--json", str(path)],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    rows = [_json.loads(line) for line in proc.stdout.splitlines()]
    assert sorted(r["trace_id"] for r in rows) == ["0", "1", "2", "3", "4"]
    assert sum(sum(r["tool_calls"].values()) for r in rows) == 5  # SOURCES.md
    assert all(r["unanswered"] == 0 for r in rows)
