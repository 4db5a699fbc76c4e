"""Hostile records inside a well-formed OTLP request, sent to a real
``trajgrade grade --otlp``: one bad record costs that record only (counted
in ``partial_success``, its own session tainted), never the request's other
records, whatever the encoding."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceResponse,
)
from tests._http import post, raw_request
from tests.telemetry._grade import Grader

from trajgrade.telemetry._logs_json import logs_message

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = pytest.mark.slow

POLICY = """graders:
  - type: tool-calls
    name: no-notes
    config:
      disallowed:
        - {name: "^Write$", args: {file_path: "note\\\\.txt$"}}
"""


def _record(session: str, path: str, extra: str = "") -> str:
    """A Claude Code tool_result of ``Write`` to ``path`` (JSON text);
    ``extra`` is one more attribute, as JSON text."""
    attrs = [
        {"key": "session.id", "value": {"stringValue": session}},
        {"key": "tool_name", "value": {"stringValue": "Write"}},
        {"key": "success", "value": {"stringValue": "true"}},
        {
            "key": "tool_input",
            "value": {"stringValue": json.dumps({"file_path": path})},
        },
    ]
    text = json.dumps(
        {
            "timeUnixNano": "1700000000000000000",
            "eventName": "claude_code.tool_result",
            "attributes": attrs,
        }
    )
    return text[:-2] + ("," + extra if extra else "") + "]}"


def _deep(levels: int) -> str:
    """An attribute whose value is a kvlist nested ``levels`` deep (as text:
    too deep for a recursive encoder)."""
    value = (
        '{"kvlistValue":{"values":[{"key":"k","value":' * levels
        + '{"stringValue":"x"}'
        + "}]}}" * levels
    )
    return '{"key":"deep","value":' + value + "}"


def _request(*records: str) -> bytes:
    inner = ",".join(records)
    return (
        '{"resourceLogs":[{"scopeLogs":[{"logRecords":[' + inner + "]}]}]}"
    ).encode()


@pytest.fixture(name="grader")
def grader_fixture(tmp_path: Path) -> Iterator[Grader]:
    policy = tmp_path / "p.yaml"
    policy.write_text(POLICY)
    g = Grader(policy)
    try:
        yield g
    finally:
        g.stop()


def _send(port: int, body: bytes, ctype: str) -> tuple[int, bytes]:
    headers = {"Content-Type": ctype, "Content-Length": str(len(body))}
    status, _, resp, _ = raw_request(port, post("/v1/logs", body, headers))
    return status, resp


def _rejected(resp: bytes, ctype: str) -> int:
    if ctype == "application/json":
        partial: dict[str, Any] = json.loads(resp).get("partialSuccess", {})
        return int(partial.get("rejectedLogRecords", 0))
    msg = ExportLogsServiceResponse()
    msg.ParseFromString(resp)
    return msg.partial_success.rejected_log_records


@pytest.mark.parametrize("ctype", ["application/json", "application/x-protobuf"])
def test_a_deep_record_costs_itself_only(grader: Grader, ctype: str) -> None:
    """30 levels of kvlist is a valid message (protobuf parses 100 message
    levels) but its JSON line would nest past 128: the record is refused,
    the other session's violation is still found, and the deep record's own
    session is tainted, not the receiver's."""
    body = _request(_record("good", "note.txt"), _record("deep", "a.txt", _deep(30)))
    if ctype == "application/x-protobuf":
        body = logs_message(json.loads(body)).SerializeToString()
    status, resp = _send(grader.port, body, ctype)
    assert status == 200, resp
    assert _rejected(resp, ctype) == 1
    assert grader.stop() == 1
    verdicts = {(v["trace_id"], v["outcome"]) for v in grader.rest() if v["final"]}
    assert verdicts == {("good", "fail"), ("deep", "error")}
    rejected = [r for r in grader.log if r.get("event") == "input_rejected"]
    assert [r["trace"] for r in rejected] == ["deep"]
    assert ".attributes[4].value" in rejected[0]["field"]


def test_a_request_past_the_line_limit_rejects_all_its_records(
    tmp_path: Path,
) -> None:
    """A request whose OTLP/JSON line is over --max-line-bytes is refused
    whole: partial_success counts every record of it, not one."""
    policy = tmp_path / "p.yaml"
    policy.write_text(POLICY)
    g = Grader(policy, "--max-line-bytes", "2000")
    try:
        body = _request(*(_record(f"s{i}", "a.txt") for i in range(10)))
        status, resp = _send(g.port, body, "application/json")
        assert status == 200, resp
        assert _rejected(resp, "application/json") == 10
    finally:
        g.stop()


def _span_request(value: str) -> bytes:
    span = (
        '{"traceId":"' + "ab" * 16 + '","spanId":"' + "cd" * 8 + '",'
        '"startTimeUnixNano":"1","attributes":[{"key":"k","value":' + value + "}]}"
    )
    return ('{"resourceSpans":[{"scopeSpans":[{"spans":[' + span + "]}]}]}").encode()


@pytest.mark.parametrize("kind", ["arrayValue", "kvlistValue"])
@pytest.mark.parametrize("path", ["/v1/logs", "/v1/traces"])
def test_decoded_lines_never_nest_past_the_line_bound(kind: str, path: str) -> None:
    """Whatever the nesting the decoders accept, the line fits the bound the
    line reader enforces; shallow values are left as they are; what a
    decoder refuses (json_format: 100 message levels) is a 400, not a crash."""
    from trajgrade._util.depth import too_deep
    from trajgrade.formats._otel_values import REFUSED
    from trajgrade.telemetry.codec import BadPayload, decode

    refused = 0
    for levels in (5, 25, 29, 30, 31, 32, 33, 40, 45, 60, 90, 300):
        inner = '{"stringValue":"x"}'
        for _ in range(levels):
            inner = (
                '{"arrayValue":{"values":[' + inner + "]}}"
                if kind == "arrayValue"
                else '{"kvlistValue":{"values":[{"key":"k","value":' + inner + "}]}}"
            )
        attr = '{"key":"deep","value":' + inner + "}"
        body = (
            _request(_record("s", "a.txt", attr))
            if path == "/v1/logs"
            else _span_request(inner)
        )
        try:
            line = decode(path, body, "application/json").line
        except BadPayload as exc:
            reason = str(exc)
            line = b""
        else:
            reason = ""
        if reason:
            assert "deep" in reason or "recursion" in reason, levels
            continue
        assert not too_deep(line), levels
        assert (REFUSED.encode() in line) == too_deep(body), levels
        refused += REFUSED.encode() in line
    assert refused


@pytest.mark.parametrize("path", ["/v1/logs", "/v1/traces"])
def test_a_request_of_countless_tiny_values_is_413(tmp_path: Path, path: str) -> None:
    """An empty attribute is 2 bytes of protobuf and ~450 bytes once decoded:
    a request with more values than the body limit allows for (one per 32
    bytes, at least 65,536) is refused before it is expanded, not graded."""
    from google.rpc import status_pb2
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
        ExportLogsServiceRequest,
    )
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    if path == "/v1/logs":
        logs = ExportLogsServiceRequest()
        owner = logs.resource_logs.add().scope_logs.add().log_records.add()
        owner.event_name = "claude_code.user_prompt"
        request: Any = logs
    else:
        traces = ExportTraceServiceRequest()
        owner = traces.resource_spans.add().scope_spans.add().spans.add()
        owner.trace_id = b"\x01" * 16
        request = traces
    for _ in range(100_000):
        owner.attributes.add()
    body = request.SerializeToString()
    assert len(body) < 1_000_000
    policy = tmp_path / "p.yaml"
    policy.write_text(POLICY)
    g = Grader(policy, "--otlp-max-body", "1000000")
    try:
        headers = {"Content-Type": "application/x-protobuf"}
        headers["Content-Length"] = str(len(body))
        status, _, resp, _ = raw_request(g.port, post(path, body, headers))
        assert status == 413, resp
        st = status_pb2.Status()
        st.ParseFromString(resp)
        assert "values" in st.message
        assert g.proc.poll() is None
    finally:
        g.stop()


def test_a_request_of_bad_records_logs_a_bounded_number_of_lines(
    tmp_path: Path,
) -> None:
    """One located line per bad record made a 2.7 MB request of 100,000
    empty records 30 MB of log (11 times its size): the first 20 of a line
    are logged, the rest counted in one summary line; all are rejected."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
        ExportLogsServiceRequest,
    )

    request = ExportLogsServiceRequest()
    records = request.resource_logs.add().scope_logs.add()
    for _ in range(1000):
        records.log_records.add().event_name = "claude_code.tool_result"
    body = request.SerializeToString()
    policy = tmp_path / "p.yaml"
    policy.write_text(POLICY)
    g = Grader(policy)
    try:
        status, resp = _send(g.port, body, "application/x-protobuf")
        assert status == 200
        assert _rejected(resp, "application/x-protobuf") == 1000
    finally:
        g.stop()
    located = [r for r in g.log if r.get("event") == "input_rejected"]
    [more] = [r for r in g.log if r.get("event") == "input_rejected_more"]
    assert len(located) == 20
    assert (more["line"], more["count"]) == (1, 980)
