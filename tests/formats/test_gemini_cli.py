"""Gemini CLI chat sessions: the real corpus files, then edge cases."""

from __future__ import annotations

import itertools
import json
import random
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

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
from trajgrade.formats import detect_document
from trajgrade.formats.gemini_cli import FORMAT, GeminiCliReader
from trajgrade.pipeline.decoder import SourceDecoder

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gemini-cli"
_CALLS = re.compile(r"^(\d+) \(status (\w+)=(\d+)\)$")


def _provenance() -> dict[str, tuple[int, str]]:
    """fixture name -> (tool calls, their one status), from the fixtures' SOURCES.md."""
    counts: dict[str, tuple[int, str]] = {}
    for row in (FIXTURES / "SOURCES.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) == 10 and (m := _CALLS.match(cells[7])):
            assert m[1] == m[3]
            counts[cells[0].strip("`")] = (int(m[1]), m[2])
    return counts


SOURCES = _provenance()
NAMES = sorted(SOURCES)
THREE = "agentcmd_gemini_3_calls.json"
ERROR = "agentcmd_gemini_error_only.json"


def _decode(
    data: bytes, chunks: list[int] | None = None
) -> tuple[list[Event], list[InputError], str | None]:
    """Events, errors and detected format of ``data`` fed through a SourceDecoder."""
    decoder = SourceDecoder("session.json")
    events: list[Event] = []
    errors: list[InputError] = []
    cuts = [0, *(chunks or []), len(data)]
    for a, b in itertools.pairwise(cuts):
        batch = decoder.feed(data[a:b])
        events += batch.events
        errors += batch.errors
    batch = decoder.close()
    return events + batch.events, errors + batch.errors, decoder.format


def _fixture(name: str) -> tuple[dict[str, Any], list[Event]]:
    raw = (FIXTURES / name).read_bytes()
    events, errors, fmt = _decode(raw)
    assert errors == [] and fmt == "gemini-cli"
    return json.loads(raw), events


def _of(events: list[Event], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


@pytest.mark.parametrize("name", NAMES)
def test_tool_calls_and_statuses_match_the_corpus(name: str) -> None:
    """Each fixture yields SOURCES.md's tool calls, each answered with its status, in the session's trace."""
    doc, events = _fixture(name)
    calls, status = SOURCES[name]
    assert len(_of(events, ToolCall)) == calls
    results = _of(events, ToolResult)
    assert [r.call_id for r in results] == [c.call_id for c in _of(events, ToolCall)]
    assert {r.is_error for r in results} == {status != "success"}
    assert {e.trace_id for e in events} == {doc["sessionId"]}
    assert isinstance(events[0], TraceStart) and isinstance(events[-1], TraceEnd)


@pytest.mark.parametrize("name", NAMES)
def test_one_turn_and_one_usage_per_model_response(name: str) -> None:
    """Each gemini message opens one turn and gives its tokens once; user messages are messages."""
    doc, events = _fixture(name)
    responses = [m for m in doc["messages"] if m["type"] == "gemini"]
    assert len(_of(events, TurnStart)) == len(responses)
    usage = _of(events, Usage)
    assert [u.input_tokens + u.output_tokens for u in usage] == [
        m["tokens"]["total"] for m in responses
    ]
    assert [u.cache_read_tokens for u in usage] == [
        m["tokens"]["cached"] for m in responses
    ]
    users = [m for m in _of(events, Message) if m.role == "user"]
    assert len(users) == sum(m["type"] == "user" for m in doc["messages"])


def test_calls_keep_names_arguments_results_and_timestamps() -> None:
    """Tool names, object args, the output text and the call's timestamp come through."""
    _, events = _fixture(THREE)
    call = _of(events, ToolCall)[0]
    assert (
        call.name == "read_file"
        and call.call_id == "read_file-1761734225259-ef6c719c767c"
    )
    assert call.args == {"absolute_path": "/private/tmp/gemini-test/created.txt"}
    assert call.ts == pytest.approx(1761734225.272)
    result = _of(events, ToolResult)[0]
    assert result.result == "Hello from Gemini CLI" and result.name == "read_file"
    thoughts = [m for m in _of(events, Message) if m.role == "reasoning"]
    assert thoughts[0].text.startswith("Initiating File Operations: ")


def test_a_failed_call_carries_its_error_text() -> None:
    """status error gives is_error and the functionResponse's error as the result."""
    _, events = _fixture(ERROR)
    (result,) = _of(events, ToolResult)
    assert result.is_error is True
    assert result.result.startswith('Tool "write_file" not found in registry')


@pytest.mark.parametrize("name", NAMES)
def test_random_chunks_give_the_same_events(name: str) -> None:
    """The document fed in random-sized chunks decodes to the same events as whole."""
    raw = (FIXTURES / name).read_bytes()
    whole, _, _ = _decode(raw)
    rng = random.Random(name)
    for _ in range(10):
        cuts = sorted(rng.sample(range(1, len(raw)), rng.randint(1, 40)))
        chunked, errors, fmt = _decode(raw, cuts)
        assert errors == [] and fmt == "gemini-cli" and chunked == whole


def test_a_truncated_session_keeps_earlier_messages_and_reports_the_cut() -> None:
    """A session cut inside a message keeps the messages before it and reports the cut with the trace."""
    raw = (FIXTURES / THREE).read_bytes()
    cut = raw.index(b'"replace-1761734228885')
    events, errors, _ = _decode(raw[:cut])
    assert [c.name for c in _of(events, ToolCall)] == ["read_file"]
    assert not _of(events, TraceEnd)
    (err,) = errors
    assert "not valid JSON" in err.message
    assert err.trace_id == "453aa339-7d2b-4709-a41a-b0b73beaff85"


def _read(doc: dict[str, Any]) -> tuple[list[Event], list[InputError]]:
    reader = GeminiCliReader(source="s.json", default_trace="s.json")
    events, errors, _ = reader.feed(json.dumps(doc).encode(), 1)
    more, errs = reader.close()
    return events + more, errors + errs


def test_error_messages_unfinished_calls_and_string_args() -> None:
    """An error message is an agent error, a running call stays unanswered, string args parse once."""
    call = {"id": "c1", "name": "run_shell_command", "args": '{"command": "ls"}'}
    doc = {
        "sessionId": "s",
        "messages": [
            {"type": "gemini", "content": "", "toolCalls": [call, {"id": "nameless"}]},
            {"type": "error", "content": "quota exceeded"},
            {"type": "info", "content": "notice"},
        ],
    }
    events, errors = _read(doc)
    (tc,) = _of(events, ToolCall)
    assert tc.args == {"command": "ls"} and tc.args_raw == call["args"]
    assert not _of(events, ToolResult)
    assert [e.message for e in _of(events, AgentError)] == ["quota exceeded"]
    assert not _of(events, Message)
    assert [(e.location.field, e.trace_id) for e in errors] == [("toolCalls", "s")]


def test_a_call_status_that_is_not_a_string_is_a_located_error() -> None:
    """A ``status`` that is not a string (here without a ``result``, where
    it decides whether the call finished) is an error at
    ``toolCalls[i].status``, not a reader failure; that call is skipped and
    the document's other calls and messages still count."""
    good = {"id": "c1", "name": "ls", "status": "success", "result": []}
    bad = {"id": "c2", "name": "cat", "status": {"code": 0}}
    doc = {
        "sessionId": "s",
        "messages": [
            {"type": "gemini", "content": "a", "toolCalls": [good, bad]},
            {"type": "user", "content": "b"},
        ],
    }
    events, errors = _read(doc)
    (err,) = errors
    assert (err.location.field, err.trace_id) == ("toolCalls[1].status", "s")
    assert err.location.line == 1 and "must be a string" in err.message
    assert [c.call_id for c in _of(events, ToolCall)] == ["c1"]
    assert [r.call_id for r in _of(events, ToolResult)] == ["c1"]
    assert [m.text for m in _of(events, Message)] == ["a", "b"]
    assert isinstance(events[-1], TraceEnd)


def test_cancelled_calls_are_errors_and_odd_results_are_kept_whole() -> None:
    """A cancelled call is an error result; a result that is not one output is kept as written."""
    raw = [{"functionResponse": {"response": {"output": "a", "extra": 1}}}]
    call = {"id": "c", "name": "t", "args": {}, "status": "cancelled", "result": raw}
    events, _ = _read(
        {"sessionId": "s", "messages": [{"type": "gemini", "toolCalls": [call]}]}
    )
    (result,) = _of(events, ToolResult)
    assert result.is_error is True and result.result == raw


def test_detection_claims_sessions_only() -> None:
    """Session documents are recognised; the JSONL header line and ATIF are not claimed."""
    raw = (FIXTURES / THREE).read_bytes()
    assert detect_document(raw[:400], final=False) == ("gemini-cli", True)
    header = (  # first line of Gemini CLI 0.61's JSONL transcript (corpus gemini-cli-live)
        b'{"sessionId":"f83041ed-3b64-4cc5-a2d1-3ea5ffa4ce42","projectHash":"81b0",'
        b'"startTime":"2026-11-22T18:43:13.996Z","lastUpdated":"2026-11-22T18:43:13.996Z",'
        b'"kind":"main"}'
    )
    assert detect_document(header, final=True) == (None, True)
    atif = (
        b'{"schema_version": "ATIF-v1.7", "session_id": "s", "steps": [{"step_id": 1}]}'
    )
    assert detect_document(atif, final=True)[0] == "atif"
    assert not FORMAT.sniff({"sessionId": "s", "messages": []})


POLICY = """\
graders:
  - type: tool-calls
    config:
      required: ["^replace$"]
      disallowed: [{name: "^run_shell_command$", command: "rm -rf"}]
  - type: token-budget
    config: {max: 20000}
"""


@pytest.mark.slow
def test_cli_grades_a_gemini_session_end_to_end(
    run_cli: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    """`trajgrade grade` auto-detects both sessions and grades each under its sessionId."""
    cfg = tmp_path / "policy.yaml"
    cfg.write_text(POLICY, encoding="utf-8")
    proc = run_cli("grade", "-c", cfg, FIXTURES / THREE, FIXTURES / ERROR)
    assert proc.returncode == 1, proc.stderr
    finals = {
        (v["trace_id"][:8], v["grader"]): (v["outcome"], v["metadata"].get("value"))
        for v in map(json.loads, proc.stdout.splitlines())
        if v["final"]
    }
    assert finals == {
        ("453aa339", "tool-calls"): ("pass", None),
        ("453aa339", "token-budget"): ("fail", 5629 + 5583 + 5515 + 5530),
        ("a63242d9", "tool-calls"): ("fail", None),
        ("a63242d9", "token-budget"): ("pass", 4808),
    }
