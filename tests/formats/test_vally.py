"""vally trajectories: events with data payloads, whole Trajectory records."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests._support import suite

from trajgrade.events import ToolCall, ToolResult, TraceEnd, TurnStart, Usage
from trajgrade.formats import detect
from trajgrade.formats.vally import VallyReader, parse_timestamp
from trajgrade.pipeline.whole import grade_bytes

#: Graders whose verdicts depend on every event of a trace.
POLICY = suite(
    """
    graders:
      - type: tool-call-count
        config: {max: 10}
      - type: token-budget
        config: {max: 1000}
    """
)
#: A whole trace, graded on its own line next to the bad records.
GOOD = {
    "id": "good",
    "events": [
        {"type": "tool_call", "data": {"toolName": "bash", "toolCallId": "g1"}},
        {"type": "tool_result", "data": {"toolCallId": "g1", "result": "ok"}},
        {"type": "usage", "data": {"inputTokens": 7, "outputTokens": 2}},
    ],
}


def _feed(*records: object) -> tuple[list[object], list[object]]:
    buf = b"".join(json.dumps(r).encode() + b"\n" for r in records)
    events, errors, _ = VallyReader(source="v.jsonl", default_trace="v").feed(buf, 1)
    return list(events), list(errors)


def test_tool_call_and_result_map_to_canonical_events() -> None:
    """toolName/toolCallId/arguments/success become name/call_id/args/is_error."""
    events, _ = _feed(
        {
            "type": "tool_call",
            "timestamp": "2025-01-15T10:30:00Z",
            "data": {
                "toolName": "bash",
                "toolCallId": "c1",
                "arguments": {"command": "ls"},
            },
        },
        {
            "type": "tool_result",
            "timestamp": "2025-01-15T10:30:01Z",
            "data": {"toolCallId": "c1", "result": "x", "success": False},
        },
    )
    assert events[0] == ToolCall(
        trace_id="v", ts=1736937000.0, name="bash", call_id="c1", args={"command": "ls"}
    )
    assert events[1] == ToolResult(
        trace_id="v", ts=1736937001.0, call_id="c1", result="x", is_error=True
    )


def test_string_arguments_are_parsed_once_and_kept_raw() -> None:
    """JSON-string arguments give both the object and the raw text."""
    events, _ = _feed(
        {"type": "tool_call", "data": {"toolName": "f", "arguments": '{"a": 1}'}}
    )
    assert events[0] == ToolCall(
        trace_id="v", name="f", args={"a": 1}, args_raw='{"a": 1}'
    )


def test_a_trajectory_record_is_one_whole_trace() -> None:
    """{"id", "events": [...]} gives its events under that id and then trace_end."""
    events, _ = _feed(
        {
            "id": "run-7",
            "events": [
                {"type": "turn_start", "data": {}},
                {"type": "usage", "input_tokens": 5, "output_tokens": 1},
            ],
        }
    )
    assert events == [
        TurnStart(trace_id="run-7"),
        Usage(trace_id="run-7", input_tokens=5, output_tokens=1),
        TraceEnd(trace_id="run-7"),
    ]


def test_bad_payload_is_located() -> None:
    """A tool_call without a string toolName is reported with its line and field."""
    _, (err,) = _feed({"type": "tool_call", "data": {"toolName": 3}})
    assert err.location.line == 1 and "toolName must be a string" in err.message


def test_detection_tells_vally_from_canonical() -> None:
    """data-carrying events are vally; flat typed events are trajgrade's own."""
    assert detect(b'{"type":"tool_call","data":{"toolName":"x"}}') == "vally"
    assert detect(b'{"events":[]}') == "vally"
    assert detect(b'{"type":"tool_call","name":"x"}') == "trajgrade"
    assert detect(b"[1,2]") is None


def test_timestamps_accept_iso_and_epoch() -> None:
    """ISO-8601 with Z and epoch numbers both become epoch seconds."""
    assert parse_timestamp("1970-01-01T00:00:10Z") == 10.0
    assert parse_timestamp(12) == 12.0
    assert parse_timestamp("yesterday") is None


def test_a_number_too_large_for_a_float_is_no_timestamp() -> None:
    """An integer beyond a float's range is invalid, not a reader failure."""
    assert parse_timestamp(10**400) is None
    assert parse_timestamp(-(10**400)) is None
    events, errors = _feed({"type": "turn_start", "timestamp": 10**400, "data": {}})
    assert events == [TurnStart(trace_id="v")] and not errors


def _finals(verdicts: list[Any], trace: str) -> list[tuple[str, str, float]]:
    return [
        (v.grader, str(v.outcome), v.score)
        for v in verdicts
        if v.final and v.trace_id == trace
    ]


@pytest.mark.parametrize(
    ("kind", "key", "value"),
    [
        ("tool_call", "toolCallId", []),  # crashed the engine (unhashable)
        ("tool_call", "toolName", None),
        ("tool_result", "toolCallId", {}),  # crashed the engine (unhashable)
        ("tool_result", "toolName", ["bash"]),
        ("tool_result", "durationMs", "12"),
        pytest.param("tool_result", "durationMs", 10**400, id="durationMs-huge"),
        ("tool_result", "success", "false"),
        ("usage", "inputTokens", {"n": 1}),
        ("usage", "outputTokens", -3),
    ],
)
def test_a_field_of_the_wrong_type_rejects_its_record_only(
    kind: str, key: str, value: object
) -> None:
    """A payload field whose type the event cannot hold is a located error
    (line, ``data.<field>``) that taints the record's trace; a tool call of
    the same trace before it and a whole trace beside it are intact."""
    data = {"toolName": "bash", "toolCallId": "c1", key: value}
    lines = [
        GOOD,
        {"type": "tool_call", "data": {"toolName": "bash", "toolCallId": "c1"}},
        {"type": kind, "data": data},
    ]
    alone = grade_bytes(POLICY, json.dumps(GOOD).encode() + b"\n", fmt="vally")
    text = "".join(json.dumps(r) + "\n" for r in lines).encode()
    got = grade_bytes(POLICY, text, source="v.jsonl", fmt="vally")
    (err,) = got.errors
    assert (err.location.line, err.location.field) == (3, f"data.{key}")
    assert f"data.{key} must be" in err.message
    assert err.trace_id == "v.jsonl"
    assert _finals(alone.verdicts, "good")
    assert _finals(got.verdicts, "good") == _finals(alone.verdicts, "good")
    assert {v.outcome.value for v in got.verdicts if v.trace_id == "v.jsonl"} == {
        "error"
    }
    events, _ = _feed(*lines[1:])
    assert events == [ToolCall(trace_id="v", name="bash", call_id="c1")]


def test_a_canonical_line_of_the_wrong_type_is_located_at_its_field() -> None:
    """A data-less (canonical) event names the field msgspec refused, and a
    type that is not a string is an unknown type, not a reader failure."""
    _, errors = _feed(
        {"type": "tool_call", "name": "bash", "call_id": []},
        {"type": {}},
        {"id": "r", "events": [{"type": "usage", "input_tokens": "many"}]},
    )
    assert [(e.location.line, e.location.field) for e in errors] == [
        (1, "call_id"),
        (2, "type"),
        (3, "events[0].input_tokens"),
    ]
    assert "Please report" not in " ".join(e.message for e in errors)
