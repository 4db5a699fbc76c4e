"""OpenResponses items: detection, whole traces, single items, mapping and bad items."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.formats._decode import feed_lines

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
from trajgrade.formats.openresponses import FORMAT, OpenResponsesReader

#: A Responses API response as OpenAI returns it (function calling with a
#: reasoning model), preceded by the request's input.
RESPONSE: dict[str, Any] = {
    "id": "resp_67ccd2bed1ec8190b14f964abc054267",
    "object": "response",
    "created_at": 1741476542,
    "status": "completed",
    "error": None,
    "incomplete_details": None,
    "instructions": None,
    "model": "o4-mini-2025-04-16",
    "input": "What is the weather like in Paris today?",
    "output": [
        {
            "id": "rs_1",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "Need the weather tool."}],
        },
        {
            "type": "function_call",
            "id": "fc_12345xyz",
            "call_id": "call_12345xyz",
            "name": "get_weather",
            "arguments": '{"location":"Paris, France"}',
            "status": "completed",
        },
    ],
    "parallel_tool_calls": True,
    "reasoning": {"effort": "medium", "summary": "auto"},
    "text": {"format": {"type": "text"}},
    "tool_choice": "auto",
    "tools": [{"type": "function", "name": "get_weather", "parameters": {}}],
    "usage": {
        "input_tokens": 328,
        "input_tokens_details": {"cached_tokens": 128},
        "output_tokens": 52,
        "output_tokens_details": {"reasoning_tokens": 32},
        "total_tokens": 380,
    },
    "metadata": {},
}


def _feed(
    *records: object, default: str = "r"
) -> tuple[list[Event], list[InputError], list[int] | None]:
    buf = b"".join(json.dumps(r).encode() + b"\n" for r in records)
    reader = OpenResponsesReader(source="r.jsonl", default_trace=default)
    return feed_lines(reader, buf)


def test_a_real_responses_object_becomes_one_trace() -> None:
    """input, reasoning, function_call and usage map in order, named by the response id."""
    events, errors, _ = _feed(RESPONSE)
    tid = RESPONSE["id"]
    assert not errors
    assert events == [
        TurnStart(trace_id=tid, source="user"),
        Message(
            trace_id=tid, role="user", text="What is the weather like in Paris today?"
        ),
        Message(trace_id=tid, role="reasoning", text="Need the weather tool."),
        ToolCall(
            trace_id=tid,
            name="get_weather",
            call_id="call_12345xyz",
            args={"location": "Paris, France"},
            args_raw='{"location":"Paris, France"}',
        ),
        Usage(
            trace_id=tid,
            input_tokens=328,
            output_tokens=52,
            cache_read_tokens=128,
            reasoning_tokens=32,
            model="o4-mini-2025-04-16",
        ),
        TraceEnd(trace_id=tid),
    ]


def test_an_item_array_is_one_trace_and_later_ones_are_numbered() -> None:
    """Each array line is a whole trace: the default trace first, then default#2."""
    items = [
        {"type": "function_call", "call_id": "c0", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c0", "output": "42"},
    ]
    events, _, lines = _feed(items, items)
    assert [(type(e).__name__, e.trace_id) for e in events] == [
        ("ToolCall", "r"),
        ("ToolResult", "r"),
        ("TraceEnd", "r"),
        ("ToolCall", "r#2"),
        ("ToolResult", "r#2"),
        ("TraceEnd", "r#2"),
    ]
    assert events[1] == ToolResult(trace_id="r", call_id="c0", result="42")
    assert lines == [1, 1, 1, 2, 2, 2]


def test_aigo_trace_items_and_metadata() -> None:
    """AI GO!'s Trace ({items, metadata}) gives trace_start metadata, then its items."""
    trace = {
        "items": [
            {
                "type": "message",
                "id": "msg_1",
                "role": "user",
                "content": [{"type": "input_text", "text": "Hi"}],
            },
            {
                "type": "message",
                "id": "msg_2",
                "role": "assistant",
                "timestamp": "2025-01-15T10:30:00Z",
                "content": [
                    {"type": "output_text", "text": "Hel", "annotations": []},
                    {"type": "output_text", "text": "lo"},
                ],
            },
        ],
        "metadata": {"agent": "weather-agent"},
    }
    events, _, _ = _feed(trace)
    assert events == [
        TraceStart(trace_id="r", metadata={"agent": "weather-agent"}),
        TurnStart(trace_id="r", source="user"),
        Message(trace_id="r", role="user", text="Hi"),
        Message(trace_id="r", ts=1736937000.0, role="assistant", text="Hello"),
        TraceEnd(trace_id="r"),
    ]


def test_single_item_lines_belong_to_the_default_trace() -> None:
    """One item per line: events of one open trace, no trace_end, one line each."""
    events, errors, lines = _feed(
        {"type": "message", "role": "user", "content": "go"},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "[1]"},
        {
            "type": "function_call_output",
            "call_id": "c",
            "output": [{"type": "input_text", "text": "x"}],
        },
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        {"type": "function_call", "name": "g", "arguments": "{}", "trace_id": "other"},
    )
    assert not errors
    assert [type(e).__name__ for e in events] == [
        "TurnStart",
        "Message",
        "ToolCall",
        "ToolResult",
        "ToolCall",
    ]
    assert events[2] == ToolCall(trace_id="r", name="f", call_id="c", args_raw="[1]")
    assert events[3] == ToolResult(
        trace_id="r", call_id="c", result=[{"type": "input_text", "text": "x"}]
    )
    assert events[4].trace_id == "other"
    assert lines == [1, 1, 2, 3, 5]


def test_reasoning_prefers_content_over_summary_and_refusals_are_text() -> None:
    """Reasoning text comes from content when present; a refusal part is the message's text."""
    events, _, _ = _feed(
        {
            "type": "reasoning",
            "content": [{"type": "reasoning_text", "text": "think"}],
            "summary": [{"type": "summary_text", "text": "s"}],
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "refusal", "refusal": "No."}],
        },
    )
    assert [e.text for e in events if isinstance(e, Message)] == ["think", "No."]


def test_failed_response_ends_in_error() -> None:
    """A failed response's error becomes an error event and its trace_end is_error."""
    record = {
        "id": "resp_x",
        "object": "response",
        "status": "failed",
        "output": [],
        "error": {"code": "server_error", "message": "boom"},
    }
    events, _, _ = _feed(record)
    assert events == [
        AgentError(trace_id="resp_x", message="boom", code="server_error"),
        TraceEnd(trace_id="resp_x", is_error=True),
    ]


def test_bad_items_are_located_and_charged_to_their_trace() -> None:
    """Nameless calls, non-objects, untyped items and bad usage are located InputErrors."""
    _, errors, _ = _feed(
        {"input": "hi", "output": [{"type": "function_call", "arguments": "{}"}, 7]},
        {"type": "function_call", "name": "f", "call_id": 3},
        {"id": "resp_2", "output": [{"foo": 1}], "usage": {"input_tokens": "9"}},
    )
    assert [(str(e.location), e.trace_id) for e in errors] == [
        ("r.jsonl:1: output[0].name", "r"),
        ("r.jsonl:1: output[1]", "r"),
        ("r.jsonl:2: call_id", "r"),
        ("r.jsonl:3: output[0].type", "resp_2"),
        ("r.jsonl:3: usage.input_tokens", "resp_2"),
    ]
    assert "a function_call needs a string name (missing)" in errors[0].message


def test_values_that_are_not_strings_are_errors_or_unknown_not_failures() -> None:
    """An item ``type`` or a response ``status`` that is not a string is an
    error at its line and field (both raised TypeError, unhashable, before);
    a content part whose type is not a string is skipped, as a part of an
    unknown type is. The records around them are read whole."""
    call = {"type": "function_call", "name": "f", "call_id": "c1", "arguments": "{}"}
    events, errors, lines = _feed(
        call,
        {"type": {}, "summary": []},
        {"id": "resp_1", "status": ["failed"], "output": [call]},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": {}, "text": "hidden"}, {"type": "text", "text": "ok"}],
        },
        [{"type": "message", "role": "user", "content": "hi"}, {"type": ["x"]}],
    )
    assert [(str(e.location), e.trace_id) for e in errors] == [
        ("r.jsonl:2: type", "r"),
        ("r.jsonl:3: status", "resp_1"),
        ("r.jsonl:5: [1].type", "r#2"),
    ]
    assert "an item needs a string type, got dict" in errors[0].message
    assert "status must be a string, got list" in errors[1].message
    assert events == [
        ToolCall(trace_id="r", name="f", call_id="c1", args={}, args_raw="{}"),
        ToolCall(trace_id="resp_1", name="f", call_id="c1", args={}, args_raw="{}"),
        TraceEnd(trace_id="resp_1"),
        Message(trace_id="r", role="assistant", text="ok"),
        TurnStart(trace_id="r#2", source="user"),
        Message(trace_id="r#2", role="user", text="hi"),
        TraceEnd(trace_id="r#2"),
    ]
    assert lines == [1, 3, 3, 4, 5, 5, 5]


def test_undecodable_lines_are_reported_and_skipped() -> None:
    """A broken line is an error; the lines around it still count."""
    reader = OpenResponsesReader(source="r.jsonl", default_trace="r")
    buf = b'{"type": "function_call", "name": "f"}\n{oops\n"text"\n'
    events, errors, _ = reader.feed(buf, 10)
    assert len(events) == 1
    assert [e.location.line for e in errors] == [11, 12]
    assert "not valid JSON" in errors[0].message
    assert "expected a JSON object or array, got str" in errors[1].message


@pytest.mark.parametrize(
    "record",
    [
        [{"type": "message", "role": "user", "content": "hi"}],
        RESPONSE,
        {"items": [{"type": "function_call", "name": "f"}]},
        {"type": "function_call", "name": "f", "arguments": "{}"},
        {"type": "reasoning", "summary": []},
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "x"}],
        },
    ],
)
def test_detects_openresponses_records(record: object) -> None:
    """Item arrays, response and trace objects, and OpenResponses-only item lines are detected."""
    assert detect(json.dumps(record).encode()) == "openresponses"


@pytest.mark.parametrize(
    "record",
    [
        {"type": "message", "role": "user", "text": "hi"},
        {"type": "tool_call", "name": "f"},
        [[{"message_type": "user_message", "content": "hi"}]],
        {"output": [{"role": "assistant", "content": "hi", "tool_calls": []}]},
        {"output_messages": [{"role": "assistant", "content": "hi"}]},
        {"events": [{"type": "tool_call", "data": {"toolName": "f"}}]},
        [],
        {},
    ],
)
def test_does_not_claim_other_formats(record: object) -> None:
    """Canonical events, Letta turns, agentv and vally records are left to their formats."""
    assert not FORMAT.sniff(record)
