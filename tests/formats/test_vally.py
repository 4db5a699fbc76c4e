"""vally trajectories: events with data payloads, whole Trajectory records."""

from __future__ import annotations

import json

from trajgrade.events import ToolCall, ToolResult, TraceEnd, TurnStart, Usage
from trajgrade.formats import detect
from trajgrade.formats.vally import VallyReader, parse_timestamp


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
