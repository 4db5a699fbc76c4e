"""agentv trace records: output messages, legacy static traces, detection."""

from __future__ import annotations

import json
import math

from tests._support import suite
from tests.formats._decode import feed_lines

from trajgrade.errors import InputError
from trajgrade.events import Event, Message, ToolCall, ToolResult, TraceEnd, Usage
from trajgrade.formats import detect
from trajgrade.formats.agentv import FORMAT, AgentvReader
from trajgrade.pipeline.whole import grade_bytes
from trajgrade.verdicts import Outcome


def _feed(*records: object) -> tuple[list[Event], list[InputError], list[int]]:
    buf = b"".join(json.dumps(r).encode() + b"\n" for r in records)
    events, errors, lines = feed_lines(
        AgentvReader(source="a.jsonl", default_trace="a"), buf
    )
    assert lines is not None
    return events, errors, lines


def test_output_messages_become_messages_calls_and_results() -> None:
    """A call with output and duration_ms gives a ToolCall and, right after it, its ToolResult."""
    events, errors, _ = _feed(
        {
            "id": "eval-001",
            "output_messages": [
                {
                    "role": "assistant",
                    "content": "Searching.",
                    "tool_calls": [
                        {
                            "tool": "knowledgeSearch",
                            "input": {"query": "REST vs GraphQL"},
                            "output": {"results": []},
                            "id": "call_123",
                            "timestamp": "2024-01-15T10:30:00Z",
                            "duration_ms": 45,
                        }
                    ],
                }
            ],
        }
    )
    assert errors == []
    assert events == [
        Message(trace_id="eval-001", role="assistant", text="Searching."),
        ToolCall(
            trace_id="eval-001",
            ts=1705314600.0,
            name="knowledgeSearch",
            call_id="call_123",
            args={"query": "REST vs GraphQL"},
        ),
        ToolResult(
            trace_id="eval-001",
            ts=1705314600.0,
            call_id="call_123",
            name="knowledgeSearch",
            result={"results": []},
            duration_ms=45,
        ),
        TraceEnd(trace_id="eval-001"),
    ]


def test_string_input_is_kept_raw_and_not_parsed() -> None:
    """agentv compares a JSON-string input as a string, so it stays in args_raw only."""
    events, _, _ = _feed(
        {
            "output": [
                {
                    "role": "assistant",
                    "tool_calls": [{"tool": "f", "input": '{"a": 1}'}],
                }
            ]
        }
    )
    assert events[1] == ToolCall(trace_id="a", name="f", args_raw='{"a": 1}')


def test_calls_without_result_fields_get_no_result_and_no_id() -> None:
    """Only output, duration_ms or status produce a ToolResult; its call gets a synthetic id."""
    events, _, _ = _feed(
        {
            "output_messages": [
                {
                    "role": "assistant",
                    "tool_calls": [{"tool": "a"}, {"tool": "b", "duration_ms": 0}],
                }
            ]
        }
    )
    assert [type(e).__name__ for e in events] == [
        "Message",
        "ToolCall",
        "ToolCall",
        "ToolResult",
        "TraceEnd",
    ]
    assert events[1] == ToolCall(trace_id="a", name="a")
    assert events[2] == ToolCall(trace_id="a", name="b", call_id="agentv-call-1")
    assert events[3] == ToolResult(
        trace_id="a", call_id="agentv-call-1", name="b", duration_ms=0
    )


def test_usage_cost_and_text_are_mapped() -> None:
    """token_usage and cost_usd give one Usage event; text is the trace's result."""
    events, _, _ = _feed(
        {
            "text": "done",
            "output": [],
            "token_usage": {"input": 10, "output": 3, "cached": 2},
            "cost_usd": 0.5,
        }
    )
    assert events == [
        # agentv's CLI provider answers a record without messages with its text.
        Message(trace_id="a", role="assistant", text="done"),
        Usage(
            trace_id="a",
            input_tokens=10,
            output_tokens=3,
            cache_read_tokens=2,
            cost_usd=0.5,
        ),
        TraceEnd(trace_id="a", result="done"),
    ]


def test_legacy_static_trace_pairs_results_by_id() -> None:
    """{text, trace: [...]} is read as cat-trace.ts converts it: one assistant message."""
    events, _, _ = _feed(
        {
            "text": "answer",
            "trace": [
                {"type": "tool_call", "id": "c1", "name": "web", "input": {"q": 1}},
                {"type": "tool_result", "id": "c1", "name": "web", "output": "ok"},
                {"type": "tool_call", "id": "c2", "name": "fetch", "startTime": 5},
            ],
        },
        {"text": "nothing", "trace": []},
    )
    assert events == [
        Message(trace_id="a", role="assistant", text="answer"),
        ToolCall(trace_id="a", name="web", call_id="c1", args={"q": 1}),
        ToolResult(trace_id="a", call_id="c1", name="web", result="ok"),
        ToolCall(trace_id="a", ts=5.0, name="fetch", call_id="c2"),
        TraceEnd(trace_id="a", result="answer"),
        TraceEnd(trace_id="a#2", result="nothing"),
    ]


def test_records_are_traces_with_ids_and_line_numbers() -> None:
    """Each record ends its trace; ids default to the source, then #n; lines are per event."""
    events, _, lines = _feed(
        {"id": "x", "output": []}, {"output_messages": []}, {"output": []}
    )
    assert [e.trace_id for e in events if isinstance(e, TraceEnd)] == [
        "x",
        "a#2",
        "a#3",
    ]
    assert lines == [1, 1, 2, 2, 3, 3]


def test_bad_records_are_located_and_charged_to_their_trace() -> None:
    """Bad JSON, a non-object and a call without a string tool are reported with line and field."""
    reader = AgentvReader(source="a.jsonl", default_trace="a")
    buf = b'{oops\n[1]\n{"id": "r", "output": [{"role": "assistant", "tool_calls": [{"input": {}}]}]}\n'
    events, errors, lines = feed_lines(reader, buf)
    assert [e.location.line for e in errors] == [1, 2, 3]
    assert "not valid JSON" in errors[0].message
    assert errors[2].location.field == "output[0].tool_calls[0].tool"
    assert errors[2].trace_id == "r" and "needs a string `tool`" in errors[2].message
    assert [type(e).__name__ for e in events] == ["Message", "TraceEnd"]
    assert lines == [3, 3]


def test_detection_claims_agentv_records_only() -> None:
    """agentv records are detected; vally, OpenResponses, letta and canonical ones are not claimed."""
    assert detect(b'{"output_messages": []}') == "agentv"
    assert detect(b'{"output": []}') == "agentv"
    assert detect(b'{"output": [{"role": "assistant", "content": "x"}]}') == "agentv"
    assert (
        detect(b'{"text": "t", "trace": [{"type": "tool_call", "name": "a"}]}')
        == "agentv"
    )
    for other in (
        {"events": []},
        {"output": [{"type": "message", "role": "assistant", "content": []}]},
        {"object": "response", "output": []},
        {"trajectory": []},
        [[{"message_type": "assistant_message"}]],
        {"type": "tool_call", "name": "a"},
    ):
        assert not FORMAT.sniff(other), other


def test_grading_an_agentv_record_end_to_end() -> None:
    """An agentv eval file and record give agentv's verdict; the slow Read seals the fail early."""
    s = suite(
        """
        execution:
          evaluators:
            - name: perf
              type: tool_trajectory
              mode: in_order
              expected:
                - {tool: Read, max_duration_ms: 100}
                - {tool: Write}
        """
    )
    record = {
        "id": "run-1",
        "output_messages": [
            {
                "role": "assistant",
                "tool_calls": [
                    {"tool": "Read", "input": {}, "duration_ms": 120},
                    {"tool": "Write", "input": {}},
                ],
            }
        ],
    }
    result = grade_bytes(s, json.dumps(record).encode() + b"\n", source="r.jsonl")
    sealed, v = result.verdicts
    assert not sealed.final and sealed.outcome is Outcome.FAIL
    assert v.trace_id == "run-1" and v.final and math.isclose(v.score, 2 / 3)
    assert v.metadata["misses"] == ["Read took 120ms (max: 100ms)"]


def test_agentv_transcript_lines_are_one_trace_per_test_id() -> None:
    """agentv's transcript JSONL (one message a line) is detected and read: 3 calls, all answered."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    path = (
        Path(__file__).parents[1]
        / "fixtures"
        / "agentv"
        / "agentv_imported-codex-transcript.jsonl"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "trajgrade", "stats", "--json", str(path)],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    (row,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert row["trace_id"] == "imported-codex-config-fix"
    assert row["tool_calls"] == {"Read": 1, "Grep": 1, "Edit": 1}  # SOURCES.md: 3
    assert (row["results"], row["unanswered"]) == (3, 0)


def _calls(record: dict[str, object]) -> list[ToolCall]:
    events, errors, _ = _feed(record)
    assert errors == []
    return [e for e in events if isinstance(e, ToolCall)]


def test_null_and_other_json_inputs_are_kept_as_values() -> None:
    """agentv compares `input: null` (and numbers, arrays) as values; a missing input is undefined."""
    inputs = [{"tool": "a", "input": None}, {"tool": "b", "input": [1]}, {"tool": "c"}]
    calls = _calls({"output": [{"role": "assistant", "tool_calls": inputs}]})
    assert [(c.args, c.args_raw, c.args_json) for c in calls] == [
        (None, None, "null"),
        (None, None, "[1]"),
        (None, None, None),
    ]


def test_output_wins_over_output_messages() -> None:
    """parseOutputContent reads `output ?? output_messages`: output, even when empty."""
    both = {
        "output": [{"role": "assistant", "tool_calls": [{"tool": "a"}]}],
        "output_messages": [{"role": "assistant", "tool_calls": [{"tool": "b"}]}],
    }
    assert [c.name for c in _calls(both)] == ["a"]
    events, _, _ = _feed({**both, "output": [], "text": 7})
    assert events[0] == Message(trace_id="a", role="assistant", text="7")
    assert not any(isinstance(e, ToolCall) for e in events)


def test_a_record_without_messages_is_one_assistant_message() -> None:
    """The CLI provider answers with the record's text, else with the record itself."""
    events, _, _ = _feed({"output_messages": [], "text": "done"}, {"id": "r"})
    messages = [e for e in events if isinstance(e, Message)]
    assert [m.text for m in messages] == ["done", '{"id":"r"}']


def test_negative_call_durations_are_kept() -> None:
    """agentv drops only a negative record-level duration: `a completed in -5ms`."""
    s = suite(
        """
        execution:
          evaluators:
            - name: t
              type: tool_trajectory
              mode: in_order
              expected: [{tool: a, max_duration_ms: 100}]
        """
    )
    record = {
        "duration_ms": -3,
        "output": [
            {"role": "assistant", "tool_calls": [{"tool": "a", "duration_ms": -5}]}
        ],
    }
    result = grade_bytes(s, json.dumps(record).encode() + b"\n", source="r.jsonl")
    final = next(v for v in result.verdicts if v.final)
    assert (
        final.passed and final.metadata["hits"][1] == "a completed in -5ms (max: 100ms)"
    )


def test_numbers_past_a_float_are_not_numbers_and_fail_nothing() -> None:
    """Integers too large for a float (durations, times, counts, cost, a
    numeric ``text``) are read as agentv's JavaScript reads 1e400: not a
    usable number (``String()`` gives Infinity); they raised OverflowError,
    a reader failure that lost the record, before."""
    huge = 10**400
    call = {"tool": "a", "duration_ms": huge, "start_time": huge, "end_time": -huge}
    record = {
        "id": "r",
        "text": huge,
        "output": [{"role": "assistant", "tool_calls": [call]}],
        "token_usage": {"input": huge, "output": 3, "cached": huge},
        "cost_usd": huge,
    }
    events, errors, _ = _feed(record, {"id": "s", "text": -huge})
    assert errors == []
    assert events == [
        Message(trace_id="r", role="assistant"),
        ToolCall(trace_id="r", name="a"),
        Usage(trace_id="r", output_tokens=3),
        TraceEnd(trace_id="r", result=huge),
        Message(trace_id="s", role="assistant", text="-Infinity"),
        TraceEnd(trace_id="s", result=-huge),
    ]


def test_null_input_follows_agentv_args_matching() -> None:
    """superset with `args: {}` matches a null input; keyed superset/subset throw upstream (error)."""

    def grade(entry: str) -> object:
        s = suite(
            "execution:\n  evaluators:\n    - name: t\n      type: tool_trajectory\n"
            f"      mode: in_order\n      expected: [{entry}]\n"
        )
        record = {
            "output": [
                {"role": "assistant", "tool_calls": [{"tool": "a", "input": None}]}
            ]
        }
        result = grade_bytes(s, json.dumps(record).encode() + b"\n", source="r.jsonl")
        return next(v for v in result.verdicts if v.final)

    assert grade("{tool: a, args: {}, args_match: superset}").passed
    assert not grade("{tool: a, args: {}, args_match: exact}").passed  # {} is not null
    for mode in ("superset", "subset"):
        v = grade(f"{{tool: a, args: {{q: 1}}, args_match: {mode}}}")
        assert (
            v.outcome is Outcome.ERROR
            and "Cannot convert undefined or null" in v.evidence
        )
