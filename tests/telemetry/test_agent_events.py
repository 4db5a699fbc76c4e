"""Agents' real OpenTelemetry log events become canonical events (the
``otel`` format, ``resourceLogs`` lines), whatever the transport encoding."""

from __future__ import annotations

import json

import pytest
from tests.telemetry._otlp import bodies, events_of, recorded_events

from trajgrade.events import ToolCall, ToolResult, TurnStart, Usage
from trajgrade.formats import detect
from trajgrade.telemetry.codec import BadPayload, decode


def _calls(events: list[object]) -> list[tuple[str, object]]:
    return [
        (e.name, (e.args or {}).get("command") or (e.args or {}).get("cmd"))
        for e in events
        if isinstance(e, ToolCall)
    ]


@pytest.mark.parametrize("kind", ["http-json", "http-protobuf"])
def test_claude_code_export(kind: str) -> None:
    events = recorded_events("claude-code", kind)
    assert len({e.trace_id for e in events}) == 1  # session.id
    calls = [e for e in events if isinstance(e, ToolCall)]
    results = [e for e in events if isinstance(e, ToolResult)]
    assert [c.name for c in calls] == ["Bash", "Bash", "Write", "Bash"]
    assert calls[0].args == {"command": "echo hello", "description": "Print hello"}
    assert calls[2].args is not None
    assert calls[2].args["file_path"].endswith("/note.txt")
    assert [r.is_error for r in results] == [False, False, False, True]
    assert all(r.duration_ms is not None and r.duration_ms >= 0 for r in results)
    assert [r.call_id for r in results] == [c.call_id for c in calls]
    usage = [e for e in events if isinstance(e, Usage)]
    assert len(usage) == 5
    assert {(u.model, u.input_tokens, u.output_tokens, u.cost_usd) for u in usage} == {
        ("claude-opus-4-8", 100, 20, 0.001)
    }
    assert isinstance(events[0], TurnStart)
    assert events[0].source == "user"


@pytest.mark.parametrize("kind", ["http-json", "http-protobuf"])
def test_codex_export(kind: str) -> None:
    events = recorded_events("codex", kind)
    assert len({e.trace_id for e in events}) == 1  # conversation.id
    assert _calls(events)[:2] == [
        ("exec_command", "echo hello"),
        ("exec_command", "cat /etc/hostname"),
    ]
    results = [e for e in events if isinstance(e, ToolResult)]
    assert results[0].result is not None
    assert "hello" in str(results[0].result)
    usage = [e for e in events if isinstance(e, Usage)]
    assert usage
    assert all(u.input_tokens == 100 and u.output_tokens == 20 for u in usage)
    assert {u.model for u in usage} == {"gpt-5.5"}
    # one turn per completed response (the SSE event without counts is not one)
    turns = [e for e in events if isinstance(e, TurnStart) and e.source == "agent"]
    assert len(turns) == len(usage)


def test_gemini_cli_export() -> None:
    events = recorded_events("gemini-cli", "http-json")
    assert len({e.trace_id for e in events}) == 1  # session.id
    assert _calls(events) == [
        ("run_shell_command", "echo hello"),
        ("run_shell_command", "cat /etc/hostname"),
        ("write_file", None),
        ("run_shell_command", "ls /nonexistent-trajgrade-path"),
    ]
    results = [e for e in events if isinstance(e, ToolResult)]
    assert [r.is_error for r in results] == [False, False, False, True]
    usage = [e for e in events if isinstance(e, Usage)]
    assert usage
    assert {u.model for u in usage} == {"gemini-fake"}


def test_recorded_bodies_are_detected_as_otel() -> None:
    for agent, kind in [("claude-code", "http-json"), ("codex", "http-json")]:
        for path, ctype, body in bodies(agent, kind):
            assert detect(decode(path, body, ctype).line) == "otel"


def _record(attrs: dict[str, object], **extra: object) -> dict[str, object]:
    return {
        "timeUnixNano": "1700000000000000000",
        "attributes": [
            {"key": k, "value": {"stringValue": v} if isinstance(v, str) else v}
            for k, v in attrs.items()
        ],
        **extra,
    }


def _logs(*records: dict[str, object]) -> bytes:
    body = {"resourceLogs": [{"scopeLogs": [{"logRecords": list(records)}]}]}
    return json.dumps(body).encode()


def test_a_bad_record_is_located_and_the_rest_is_read() -> None:
    good = _record(
        {
            "session.id": "s1",
            "tool_name": "Bash",
            "tool_use_id": "t1",
            "success": "true",
        },
        body={"stringValue": "claude_code.tool_result"},
    )
    bad = _record(
        {"session.id": "s1", "tool_use_id": "t2"},
        body={"stringValue": "claude_code.tool_result"},
    )
    events, errors = events_of([_logs(bad, good)])
    assert [type(e).__name__ for e in events] == ["ToolCall", "ToolResult"]
    assert len(errors) == 1
    assert (
        errors[0].location.field
        == "resourceLogs[0].scopeLogs[0].logRecords[0].attributes"
    )
    assert "tool_name" in str(errors[0])
    assert errors[0].trace_id == "s1"  # the session is tainted, not the file


def test_a_bad_attribute_taints_the_session_the_record_names() -> None:
    """Found in the raw fields, as the mapper would: Codex's event.name and
    conversation.id, the session on the resource, a GenAI traceId."""
    bad = {"key": "n", "value": {"intValue": "many"}}
    codex = {
        "attributes": [
            {"key": "event.name", "value": {"stringValue": "codex.tool_result"}},
            {"key": "conversation.id", "value": {"stringValue": "c1"}},
            bad,
        ]
    }
    on_resource = {"eventName": "gemini_cli.tool_call", "attributes": [bad]}
    genai = {
        "eventName": "gen_ai.tool.message",
        "traceId": "5b8efff798038103d269b633813fc60c",
        "attributes": [bad],
    }
    unknown = {"eventName": "some.other.event", "attributes": [bad]}
    line = {
        "resourceLogs": [
            {"scopeLogs": [{"logRecords": [codex, genai, unknown]}]},
            {
                "resource": {
                    "attributes": [
                        {"key": "session.id", "value": {"stringValue": "g1"}}
                    ]
                },
                "scopeLogs": [{"logRecords": [on_resource]}],
            },
        ]
    }
    _, errors = events_of([json.dumps(line).encode()])
    assert [e.trace_id for e in errors] == [
        "c1",
        "5b8efff798038103d269b633813fc60c",
        None,
        "g1",
    ]


def test_a_record_without_its_session_is_an_error() -> None:
    rec = _record(
        {"tool_name": "Bash"}, body={"stringValue": "claude_code.tool_result"}
    )
    events, errors = events_of([_logs(rec)])
    assert not events
    assert "session.id" in str(errors[0])


def test_genai_events_by_trace_id() -> None:
    """Semantic-convention events (gen_ai.choice with tool calls, gen_ai.tool.message)."""
    tid = "5b8efff798038103d269b633813fc60c"
    choice = _record(
        {"event.name": "gen_ai.choice"},
        traceId=tid,
        body={
            "kvlistValue": {
                "values": [
                    {
                        "key": "message",
                        "value": {
                            "kvlistValue": {
                                "values": [
                                    {
                                        "key": "tool_calls",
                                        "value": {
                                            "arrayValue": {
                                                "values": [
                                                    {
                                                        "kvlistValue": {
                                                            "values": [
                                                                {
                                                                    "key": "id",
                                                                    "value": {
                                                                        "stringValue": "c1"
                                                                    },
                                                                },
                                                                {
                                                                    "key": "function",
                                                                    "value": {
                                                                        "kvlistValue": {
                                                                            "values": [
                                                                                {
                                                                                    "key": "name",
                                                                                    "value": {
                                                                                        "stringValue": "get_weather"
                                                                                    },
                                                                                },
                                                                                {
                                                                                    "key": "arguments",
                                                                                    "value": {
                                                                                        "stringValue": '{"city": "Paris"}'
                                                                                    },
                                                                                },
                                                                            ]
                                                                        }
                                                                    },
                                                                },
                                                            ]
                                                        }
                                                    }
                                                ]
                                            }
                                        },
                                    }
                                ]
                            }
                        },
                    }
                ]
            }
        },
    )
    tool = _record(
        {"event.name": "gen_ai.tool.message"},
        traceId=tid,
        body={
            "kvlistValue": {
                "values": [
                    {"key": "id", "value": {"stringValue": "c1"}},
                    {"key": "content", "value": {"stringValue": "rainy"}},
                ]
            }
        },
    )
    line = decode("/v1/logs", _logs(choice, tool), "application/json").line
    events, errors = events_of([line])
    assert not errors
    assert {e.trace_id for e in events} == {tid}  # hex kept through protobuf
    call = next(e for e in events if isinstance(e, ToolCall))
    assert (call.name, call.call_id, call.args) == (
        "get_weather",
        "c1",
        {"city": "Paris"},
    )
    result = next(e for e in events if isinstance(e, ToolResult))
    assert (result.call_id, result.result) == ("c1", "rainy")


def test_otlp_json_ids_are_hex_both_ways() -> None:
    """The OTLP/JSON exception: trace and span ids are hex, not base64."""
    tid, sid = "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174"
    body = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {"spans": [{"traceId": tid, "spanId": sid, "name": "x", "kind": 1}]}
                ]
            }
        ]
    }
    line = json.loads(
        decode("/v1/traces", json.dumps(body).encode(), "application/json").line
    )
    span = line["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert (span["traceId"], span["spanId"], span["kind"]) == (tid, sid, 1)
    body["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] = "not-hex"
    with pytest.raises(BadPayload, match="hex"):
        decode("/v1/traces", json.dumps(body).encode(), "application/json")


@pytest.mark.parametrize(
    ("body", "ctype"),
    [
        (b"\xff\x00garbage", "application/x-protobuf"),
        (b"[1, 2]", "application/json"),
        (b'{"resourceLogs": 5}', "application/json"),
        (b"{" * 5000, "application/json"),
    ],
)
def test_bad_payloads_are_refused(body: bytes, ctype: str) -> None:
    with pytest.raises(BadPayload):
        decode("/v1/logs", body, ctype)


@pytest.mark.parametrize(
    ("agent", "kind"),
    [
        ("claude-code", "http-json"),
        ("claude-code", "http-protobuf"),
        ("codex", "http-protobuf"),
        ("gemini-cli", "http-json"),
    ],
)
def test_fast_logs_tree_is_protobufs_json_mapping(agent: str, kind: str) -> None:
    """The hand-walked logs tree equals json_format's OTLP/JSON (hex ids)."""
    from google.protobuf import json_format

    from trajgrade.telemetry import codec

    def norm(t: object) -> object:
        if isinstance(t, dict):
            return {
                k: norm(v)
                for k, v in t.items()
                if v not in ("", [], {}) or k == "value"
            }
        if isinstance(t, list):
            return [norm(x) for x in t]
        return t

    for path, ctype, body in bodies(agent, kind):
        if path != "/v1/logs":
            continue
        msg = codec._message(codec.SIGNALS[path], body, ctype)
        ref = json_format.MessageToDict(msg, use_integers_for_enums=True)
        codec._convert_ids(ref, codec._b64_to_hex)
        assert norm(codec.logs_tree(msg)) == norm(ref)


_ODD_LOGS = {
    "resource_logs": [
        {
            "resource": {
                "attributes": [{"key": "k", "value": {"int_value": 7}}],
                "droppedAttributesCount": 1,
            },
            "schemaUrl": "https://opentelemetry.io/schemas/1.30.0",
            "scope_logs": [
                {
                    "scope": {"name": "s", "version": "1", "attributes": []},
                    "log_records": [
                        {
                            "time_unix_nano": 1700000000000000000,
                            "observedTimeUnixNano": "1700000000000000001",
                            "severityNumber": "SEVERITY_NUMBER_WARN",
                            "severityText": "WARN",
                            "traceId": "5b8efff798038103d269b633813fc60c",
                            "span_id": "eee19b7ec3c1b174",
                            "flags": 1,
                            "eventName": "gen_ai.choice",
                            "body": {
                                "kvlistValue": {
                                    "values": [
                                        {"key": "d", "value": {"doubleValue": "NaN"}},
                                        {"key": "b", "value": {"bytesValue": "aGk="}},
                                        {
                                            "key": "a",
                                            "value": {
                                                "arrayValue": {
                                                    "values": [{"boolValue": True}, {}]
                                                }
                                            },
                                        },
                                        {
                                            "key": "i",
                                            "value": {
                                                "intValue": "-9223372036854775808"
                                            },
                                        },
                                    ]
                                }
                            },
                            "attributes": [{"key": "x", "value": {"stringValue": "y"}}],
                            "unknownField": {"ignored": True},
                        }
                    ],
                }
            ],
        }
    ]
}


def _logs_bodies() -> list[bytes]:
    out = [json.dumps(_ODD_LOGS).encode()]
    for agent in ("claude-code", "codex", "gemini-cli"):
        out += [b for p, _, b in bodies(agent, "http-json") if p == "/v1/logs"]
    return out


@pytest.mark.parametrize(
    "body", _logs_bodies(), ids=["odd", "claude-code", "codex", "gemini-cli"]
)
def test_fast_json_logs_parse_as_parsedict_does(body: bytes) -> None:
    """The direct JSON → message mapping serialises exactly as ParseDict's."""
    from google.protobuf import json_format
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
        ExportLogsServiceRequest,
    )

    from trajgrade.telemetry import codec
    from trajgrade.telemetry._logs_json import logs_message

    fast = logs_message(json.loads(body))
    ref = ExportLogsServiceRequest()
    json_format.ParseDict(
        codec._convert_ids(json.loads(body), codec._hex_to_b64),
        ref,
        ignore_unknown_fields=True,
    )
    assert fast.SerializeToString(deterministic=True) == ref.SerializeToString(
        deterministic=True
    )


@pytest.mark.parametrize(
    "record",
    [
        {"timeUnixNano": "soon"},
        {"attributes": [{"key": "k", "value": {"intValue": "99999999999999999999"}}]},
        {"attributes": [{"key": "k", "value": {"boolValue": "yes"}}]},
        {"body": {"stringValue": 5}},
        {"traceId": "xyz"},
        {"attributes": {"k": "v"}},
    ],
)
def test_fast_json_logs_refuse_what_parsedict_refuses(
    record: dict[str, object],
) -> None:
    body = {"resourceLogs": [{"scopeLogs": [{"logRecords": [record]}]}]}
    with pytest.raises(BadPayload):
        decode("/v1/logs", json.dumps(body).encode(), "application/json")
