"""OpenTelemetry GenAI spans (OTLP/JSON): detection, mapping, ordering, chunking, bad input."""

from __future__ import annotations

import itertools
import json
import random
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from trajgrade.events import AgentError, ToolCall, ToolResult, TurnStart, Usage
from trajgrade.formats import detect
from trajgrade.formats.otel import OtelReader
from trajgrade.pipeline.decoder import SourceDecoder

if TYPE_CHECKING:
    from collections.abc import Callable

    from trajgrade.errors import InputError
    from trajgrade.events import Event

FIXTURES = Path(__file__).parent.parent / "fixtures" / "otel"
T1 = "5b8efff798038103d269b633813fc60c"
T2 = "0af7651916cd43dd8448eb211c80319c"
BASE = 1767225600.0


def _decode(
    data: bytes, cuts: list[int] | None = None
) -> tuple[list[Event], list[InputError]]:
    """Events and errors of ``data`` through a SourceDecoder (detection included)."""
    decoder = SourceDecoder("spans.jsonl")
    events: list[Event] = []
    errors: list[InputError] = []
    for a, b in itertools.pairwise([0, *(cuts or []), len(data)]):
        batch = decoder.feed(data[a:b])
        events += batch.events
        errors += batch.errors
    end = decoder.close()
    assert decoder.format == "otel"
    return events + end.events, errors + end.errors


def _fixture(name: str) -> tuple[list[Event], list[InputError]]:
    return _decode((FIXTURES / name).read_bytes())


def _attr(key: str, value: dict[str, Any]) -> dict[str, Any]:
    return {"key": key, "value": value}


def _line(*spans: Any) -> bytes:
    """One export request holding ``spans`` under one resource and scope."""
    request = {
        "resourceSpans": [
            {"resource": {}, "scopeSpans": [{"scope": {}, "spans": list(spans)}]}
        ]
    }
    return json.dumps(request).encode() + b"\n"


def _chat(*attrs: dict[str, Any], **span: Any) -> dict[str, Any]:
    base = [_attr("gen_ai.operation.name", {"stringValue": "chat"})]
    return {
        "traceId": T1,
        "spanId": "01",
        "startTimeUnixNano": "1767225600000000000",
        "endTimeUnixNano": "1767225601000000000",
        "attributes": base + list(attrs),
        **span,
    }


def test_detects_export_requests_only() -> None:
    """A line with a resourceSpans list is otel; other shapes are not claimed."""
    assert detect((FIXTURES / "agent_run.jsonl").read_bytes().split(b"\n")[0]) == "otel"
    assert detect(b'{"resourceSpans": []}') == "otel"
    assert detect(b'{"type": "tool_call", "name": "x"}') != "otel"
    assert detect(b'{"spans": []}') != "otel"


def test_tool_spans_become_calls_and_results() -> None:
    """execute_tool spans give a call (name, id, parsed and raw args, agent) then its result."""
    events, errors = _fixture("agent_run.jsonl")
    assert not errors
    calls = [e for e in events if isinstance(e, ToolCall)]
    results = [e for e in events if isinstance(e, ToolResult)]
    assert calls[0] == ToolCall(
        trace_id=T1,
        ts=BASE + 4,
        name="read_file",
        call_id="call_1",
        args={"path": "README.md"},
        args_raw='{"path": "README.md"}',
        agent="coder",
    )
    assert results[0] == ToolResult(
        trace_id=T1,
        ts=BASE + 4,
        call_id="call_1",
        name="read_file",
        result="# trajgrade\n",
        is_error=False,
        duration_ms=250.0,
    )
    assert events.index(results[0]) == events.index(calls[0]) + 1


def test_failed_tool_span_is_an_error_result() -> None:
    """status.code 2 / error.type make is_error; kvlist arguments are args as they are."""
    events, _ = _fixture("agent_run.jsonl")
    call = next(e for e in events if isinstance(e, ToolCall) and e.name == "run_shell")
    result = next(
        e for e in events if isinstance(e, ToolResult) and e.name == "run_shell"
    )
    assert call.args == {"command": "pytest -q", "timeout": 60, "verbose": True}
    assert call.args_raw is None
    assert (result.is_error, result.result, result.duration_ms) == (True, None, 500.0)


def test_chat_spans_become_turns_with_usage() -> None:
    """Each chat span opens a turn and reports its tokens; cache reads are not added to input."""
    events, _ = _fixture("agent_run.jsonl")
    assert sum(isinstance(e, TurnStart) for e in events) == 3
    usages = [e for e in events if isinstance(e, Usage)]
    assert [(u.input_tokens, u.output_tokens, u.cache_read_tokens) for u in usages] == [
        (1200, 85, 1000),
        (1400, 40, 0),
        (1600, 120, 1400),
    ]
    assert {e.trace_id for e in events} == {T1}


def test_spans_of_a_line_are_sorted_by_start_time() -> None:
    """Spans written out of order are read by start time, each line in turn."""
    events, _ = _fixture("agent_run.jsonl")
    kinds = [type(e).__name__ for e in events]
    assert kinds == [
        "TurnStart", "Usage", "ToolCall", "ToolResult",
        "TurnStart", "Usage", "ToolCall", "ToolResult",
        "TurnStart", "Usage",
    ]  # fmt: skip
    stamps = [e.ts for e in events if e.ts is not None]
    assert stamps == sorted(stamps)
    assert len(stamps) == len(events)


def test_two_traces_in_one_line_are_kept_apart() -> None:
    """Spans of two traces interleaved in one line go to their own traceId, in time order."""
    events, errors = _fixture("interleaved.jsonl")
    assert not errors
    by_trace = {
        tid: [(type(e).__name__, e.ts) for e in events if e.trace_id == tid]
        for tid in (T1, T2)
    }
    assert by_trace[T1] == [
        ("TurnStart", BASE), ("Usage", BASE),
        ("ToolCall", BASE + 2), ("ToolResult", BASE + 2),
    ]  # fmt: skip
    assert by_trace[T2] == [
        ("TurnStart", BASE + 0.5), ("Usage", BASE + 0.5),
        ("ToolCall", BASE + 1.5), ("ToolResult", BASE + 1.5),
    ]  # fmt: skip
    assert [e.trace_id for e in events if isinstance(e, ToolCall)] == [T2, T1]


def test_attribute_value_kinds_are_decoded() -> None:
    """int (string or number), double, bool, bytes, array, kvlist and empty values decode."""
    args = {
        "kvlistValue": {
            "values": [
                _attr("n", {"intValue": "7"}),
                _attr("m", {"intValue": 8}),
                _attr("x", {"doubleValue": 0.5}),
                _attr("inf", {"doubleValue": "Infinity"}),
                _attr("ok", {"boolValue": False}),
                _attr("b", {"bytesValue": "AAE="}),
                _attr("xs", {"arrayValue": {"values": [{"stringValue": "a"}, {}]}}),
                _attr("none", {}),
            ]
        }
    }
    span = _chat(
        _attr("gen_ai.tool.name", {"stringValue": "t"}),
        _attr("gen_ai.tool.call.arguments", args),
    )
    span["attributes"][0] = _attr(
        "gen_ai.operation.name", {"stringValue": "execute_tool"}
    )
    events, errors = _decode(_line(span))
    assert not errors
    call = events[0]
    assert isinstance(call, ToolCall)
    assert call.args == {
        "n": 7, "m": 8, "x": 0.5, "inf": float("inf"), "ok": False,
        "b": "AAE=", "xs": ["a", None], "none": None,
    }  # fmt: skip


def test_failed_chat_span_reports_an_agent_error() -> None:
    """A chat span with an error status gives an error event with its message and type."""
    span = _chat(
        _attr("error.type", {"stringValue": "rate_limit"}),
        status={"code": 2, "message": "429 Too Many Requests"},
    )
    events, errors = _decode(_line(span))
    assert not errors
    assert events == [
        TurnStart(trace_id=T1, ts=BASE, source="agent"),
        AgentError(
            trace_id=T1, ts=BASE, message="429 Too Many Requests", code="rate_limit"
        ),
    ]


def test_other_operations_give_no_events() -> None:
    """invoke_agent, embeddings and non-GenAI spans are not read."""
    agent = _chat()
    agent["attributes"] = [
        _attr("gen_ai.operation.name", {"stringValue": "invoke_agent"})
    ]
    http = _chat()
    http["attributes"] = [_attr("http.request.method", {"stringValue": "GET"})]
    events, errors = _decode(_line(agent, http))
    assert (events, errors) == ([], [])


def test_an_operation_name_that_is_not_text_names_no_genai_operation() -> None:
    """A ``gen_ai.operation.name`` array or map is not a GenAI operation:
    the span is not read, as a span of another operation is (it raised
    TypeError, unhashable, before)."""
    spans = []
    for value in ({"arrayValue": {"values": []}}, {"kvlistValue": {"values": []}}):
        span = _chat()
        span["attributes"] = [_attr("gen_ai.operation.name", value)]
        spans.append(span)
    events, errors = _decode(_line(*spans, _chat()))
    assert errors == [] and [type(e) for e in events] == [TurnStart]


def _log_line(*records: dict[str, Any]) -> bytes:
    """One logs export request of Claude Code's session ``s1``."""
    resource = {"attributes": [_attr("session.id", {"stringValue": "s1"})]}
    scope = {"scope": {}, "logRecords": list(records)}
    request = {"resourceLogs": [{"resource": resource, "scopeLogs": [scope]}]}
    return json.dumps(request).encode() + b"\n"


def _tool_result(*attrs: dict[str, Any], **record: Any) -> dict[str, Any]:
    return {
        "timeUnixNano": "1767225600000000000",
        "eventName": "claude_code.tool_result",
        "attributes": [
            _attr("tool_name", {"stringValue": "Bash"}),
            _attr("success", {"stringValue": "true"}),
            *attrs,
        ],
        **record,
    }


@pytest.mark.parametrize(
    ("record", "field"),
    [
        (_tool_result(_attr("duration_ms", {"stringValue": "1e400"})), "attributes"),
        (
            _tool_result(_attr("duration_ms", {"intValue": 2**64})),
            "attributes[2].value.intValue",
        ),
        (_tool_result(_attr("duration_ms", {"boolValue": True})), "attributes"),
        (_tool_result(timeUnixNano=10**400), "timeUnixNano"),
        (
            {
                **_tool_result(),
                "eventName": "claude_code.api_request",
                "attributes": [_attr("input_tokens", {"stringValue": "\u00b2"})],
            },
            "attributes",
        ),
    ],
    ids=["duration-text", "duration-huge", "duration-bool", "time-huge", "tokens"],
)
def test_bad_log_record_values_are_located(record: dict[str, Any], field: str) -> None:
    """An agent event's number that is not a finite number, a count that is
    not ASCII digits, a time past 64 bits: an error at the record's field
    (OverflowError and ValueError escaped as reader failures before); the
    record is skipped and the next one read."""
    events, errors = _decode(_log_line(record, _tool_result()))
    assert [(e.location.line, e.location.field) for e in errors] == [
        (1, f"resourceLogs[0].scopeLogs[0].logRecords[0].{field}")
    ]
    assert "Please report" not in errors[0].message
    assert [(type(e), e.trace_id) for e in events] == [
        (ToolCall, "s1"),
        (ToolResult, "s1"),
    ]


def test_malformed_lines_and_spans_are_located_and_skipped() -> None:
    """Bad lines and a bad attribute are reported with line and field; the rest is read."""
    events, errors = _fixture("malformed.jsonl")
    located = [(e.location.line, e.location.field, e.trace_id) for e in errors]
    assert located == [
        (2, None, None),
        (3, None, None),
        (
            4,
            "resourceSpans[0].scopeSpans[0].spans[0].attributes[6].value.weirdValue",
            T1,
        ),
    ]
    assert [e.call_id for e in events if isinstance(e, ToolCall)] == ["m_1", "m_3"]
    assert isinstance(events[-1], Usage)


@pytest.mark.parametrize(
    ("span", "field"),
    [
        ({**_chat(), "traceId": ""}, "traceId"),
        ({**_chat(), "startTimeUnixNano": None}, "startTimeUnixNano"),
        ({**_chat(), "startTimeUnixNano": "soon"}, "startTimeUnixNano"),
        ({**_chat(), "attributes": {"k": 1}}, "attributes"),
        (_chat(_attr("gen_ai.usage.input_tokens", {"intValue": "-1"})), "attributes"),
        (_chat({"value": {"stringValue": "no key"}}), "attributes[1]"),
        (_chat(_attr("k", {"stringValue": "a", "intValue": 1})), "attributes[1].value"),
        # Values of the wrong type or size: TypeError (unhashable) and
        # OverflowError (past a float) escaped as reader failures before.
        ({**_chat(), "status": {"code": []}}, "status.code"),
        ({**_chat(), "status": {"code": {"error": 2}}}, "status.code"),
        ({**_chat(), "startTimeUnixNano": 10**400}, "startTimeUnixNano"),
        ({**_chat(), "startTimeUnixNano": "9" * 400}, "startTimeUnixNano"),
        ({**_chat(), "endTimeUnixNano": 2**64}, "endTimeUnixNano"),
        (_chat(_attr("k", {"doubleValue": []})), "attributes[1].value.doubleValue"),
        (
            _chat(_attr("k", {"doubleValue": 10**400})),
            "attributes[1].value.doubleValue",
        ),
        (_chat(_attr("k", {"intValue": "1" * 5000})), "attributes[1].value.intValue"),
    ],
)
def test_bad_span_fields_are_located(span: dict[str, Any], field: str) -> None:
    """Each kind of bad span field is reported at its path and the span is skipped."""
    events, errors = _decode(_line(span, 7) + _line(_chat()))
    where = "resourceSpans[0].scopeSpans[0].spans"
    assert [(e.location.line, e.location.field) for e in errors] == [
        (1, f"{where}[0].{field}"),
        (1, f"{where}[1]"),
    ]
    assert [type(e) for e in events] == [TurnStart]


def test_tool_span_without_a_name_is_an_error() -> None:
    """An execute_tool span needs gen_ai.tool.name; its trace is tainted."""
    span = _chat()
    span["attributes"] = [
        _attr("gen_ai.operation.name", {"stringValue": "execute_tool"})
    ]
    events, errors = _decode(_line(span))
    assert events == []
    assert [(e.location.field, e.trace_id) for e in errors] == [
        ("resourceSpans[0].scopeSpans[0].spans[0].attributes", T1)
    ]


def test_reader_reports_a_line_that_is_not_an_export() -> None:
    """A JSON value without a resourceSpans list is a located error."""
    reader = OtelReader(source="s.jsonl", default_trace="s")
    events, errors, _ = reader.feed(b"[1, 2]\n", 5)
    assert events == []
    assert [e.location.line for e in errors] == [5]


def test_chunking_at_random_points_gives_the_same_events() -> None:
    """Feeding the bytes in random pieces yields exactly the whole-file events and errors."""
    rng = random.Random(5)
    for name in ("agent_run.jsonl", "interleaved.jsonl", "malformed.jsonl"):
        data = (FIXTURES / name).read_bytes()
        whole = _decode(data)
        for _ in range(20):
            cuts = sorted(rng.sample(range(1, len(data)), 6))
            events, errors = _decode(data, cuts)
            assert events == whole[0]
            assert [str(e) for e in errors] == [str(e) for e in whole[1]]


POLICY = """\
graders:
  - type: tool-calls
    config:
      required: ["^read_file$"]
      disallowed: ["^delete_file$"]
  - type: token-budget
    config: {max: 4000}
"""


@pytest.mark.slow
def test_cli_grades_an_otel_export_end_to_end(
    run_cli: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    """`trajgrade grade` auto-detects OTLP/JSON and grades each trace by its traceId."""
    cfg = tmp_path / "policy.yaml"
    cfg.write_text(POLICY, encoding="utf-8")
    proc = run_cli(
        "grade", "-c", cfg, FIXTURES / "agent_run.jsonl", FIXTURES / "interleaved.jsonl"
    )
    assert proc.returncode == 1, proc.stderr
    finals = {
        (v["trace_id"][:8], v["grader"]): (v["outcome"], v["metadata"].get("value"))
        for v in map(json.loads, proc.stdout.splitlines())
        if v["final"]
    }
    assert finals == {
        ("5b8efff7", "tool-calls"): ("pass", None),
        ("5b8efff7", "token-budget"): (
            "fail",
            1200 + 85 + 1400 + 40 + 1600 + 120 + 110,
        ),
        ("0af76519", "tool-calls"): ("fail", None),
        ("0af76519", "token-budget"): ("pass", 220),
    }
