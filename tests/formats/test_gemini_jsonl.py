"""Gemini CLI JSONL sessions: the live 0.61.0 recordings, then edge cases."""

from __future__ import annotations

import itertools
import json
import random
import re
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from trajgrade.errors import InputError
from trajgrade.events import (
    Event,
    Message,
    ToolCall,
    ToolResult,
    TraceStart,
    TurnStart,
    Usage,
)
from trajgrade.formats import detect
from trajgrade.formats.gemini_jsonl import FORMAT, GeminiJsonlReader
from trajgrade.pipeline.decoder import SourceDecoder

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gemini-cli-live"
_CALLS = re.compile(r"^(\d+) \((.*)\)$")


def _provenance() -> dict[str, Counter[str]]:
    """fixture name -> tool-call statuses, from the fixtures' SOURCES.md."""
    counts: dict[str, Counter[str]] = {}
    for row in (FIXTURES / "SOURCES.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) == 5 and (m := _CALLS.match(cells[3])):
            statuses = Counter(
                {k: int(v) for k, v in (p.split("=") for p in m[2].split(", "))}
            )
            assert statuses.total() == int(m[1])
            counts[cells[0].strip("`")] = statuses
    return counts


SOURCES = _provenance()
NAMES = sorted(SOURCES)
BASE = "base.transcript.jsonl"


def _decode(
    data: bytes, chunks: list[int] | None = None
) -> tuple[list[Event], list[InputError], str | None]:
    """Events, errors and detected format of ``data`` fed through a SourceDecoder."""
    decoder = SourceDecoder("session.jsonl")
    events: list[Event] = []
    errors: list[InputError] = []
    cuts = [0, *(chunks or []), len(data)]
    for a, b in itertools.pairwise(cuts):
        batch = decoder.feed(data[a:b])
        events += batch.events
        errors += batch.errors
    batch = decoder.close()
    return events + batch.events, errors + batch.errors, decoder.format


def _fixture(name: str) -> tuple[list[dict[str, Any]], list[Event]]:
    raw = (FIXTURES / name).read_bytes()
    events, errors, fmt = _decode(raw)
    assert errors == [] and fmt == "gemini-cli-jsonl"
    return [json.loads(line) for line in raw.splitlines()], events


def _of(events: list[Event], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def _read(*records: Any) -> tuple[list[Event], list[InputError]]:
    reader = GeminiJsonlReader(source="s.jsonl", default_trace="s.jsonl")
    data = b"\n".join(
        r if isinstance(r, bytes) else json.dumps(r).encode() for r in records
    )
    events, errors, _ = reader.feed(data + b"\n", 1)
    more, errs = reader.close()
    return events + more, errors + errs


@pytest.mark.parametrize("name", NAMES)
def test_tool_calls_match_the_live_readme_and_pair_by_id(name: str) -> None:
    """Each recording yields SOURCES.md's calls once each, every one answered by id with its status."""
    records, events = _fixture(name)
    calls, results = _of(events, ToolCall), _of(events, ToolResult)
    statuses = Counter("error" if r.is_error else "success" for r in results)
    assert statuses == SOURCES[name]
    assert len({c.call_id for c in calls}) == len(calls) == statuses.total()
    assert sorted(r.call_id for r in results) == sorted(c.call_id for c in calls)
    assert {e.trace_id for e in events} == {records[0]["sessionId"]}
    assert isinstance(events[0], TraceStart)


@pytest.mark.parametrize("name", NAMES)
def test_usage_is_counted_once_per_response(name: str) -> None:
    """Usage totals equal an independent count of each response id's last tokens, one turn per response."""
    records, events = _fixture(name)
    last: dict[str, int] = {}
    for r in records:
        if r.get("type") == "gemini":
            last[r["id"]] = r["tokens"]["total"]
    usage = _of(events, Usage)
    assert len(usage) == len(_of(events, TurnStart)) == len(last)
    assert sum(u.input_tokens + u.output_tokens for u in usage) == sum(last.values())
    assistant = [m.text for m in _of(events, Message) if m.role == "assistant"]
    assert len(assistant) == len(last)


def test_the_blocked_call_carries_the_hooks_error() -> None:
    """exit2's blocked shell call is an error result with the hook's message."""
    _, events = _fixture("exit2.transcript.jsonl")
    (bad,) = [r for r in _of(events, ToolResult) if r.is_error]
    assert bad.name == "run_shell_command"
    assert bad.result.startswith("Tool execution blocked: ")


@pytest.mark.parametrize("name", NAMES)
def test_random_chunks_give_the_same_events(name: str) -> None:
    """The file fed in random-sized chunks decodes to the same events as whole."""
    raw = (FIXTURES / name).read_bytes()
    whole, _, _ = _decode(raw)
    rng = random.Random(name)
    for _ in range(10):
        cuts = sorted(rng.sample(range(1, len(raw)), rng.randint(1, 40)))
        chunked, errors, fmt = _decode(raw, cuts)
        assert errors == [] and fmt == "gemini-cli-jsonl" and chunked == whole


def test_malformed_lines_are_located_and_reading_goes_on() -> None:
    """Bad lines give errors naming their line and field; the calls after them still come out."""
    lines = (FIXTURES / BASE).read_bytes().splitlines()
    bad = [
        b'{"id": "x", "type": "gemini", "toolCalls": [{"id": "c"}]}',
        b"not json",
        b"[1, 2]",
        b'{"$set": 3}',
        b'{"$set": {"messages": [7]}}',
        b'{"id": "y", "type": "gemini", "tokens": {"input": -1}}',
    ]
    events, errors, fmt = _decode(b"\n".join([*lines[:5], *bad, *lines[5:]]) + b"\n")
    assert fmt == "gemini-cli-jsonl"
    assert [(e.location.line, e.location.field) for e in errors] == [
        (6, "toolCalls"),
        (7, None),
        (8, None),
        (9, "$set"),
        (10, "$set.messages"),
        (11, "tokens.input"),
    ]
    assert "not valid JSON" in errors[1].message
    assert len(_of(events, ToolCall)) == 4


@pytest.mark.parametrize(
    "status", [{}, ["success"], 1], ids=["object", "array", "number"]
)
def test_a_call_status_that_is_not_a_string_is_a_located_error(status: object) -> None:
    """A ``status`` that is not a string is bad input: an error at its line
    and ``toolCalls[i].status`` (it raised TypeError, unhashable, before);
    that call is skipped, the message's other calls and the lines after it
    still count, and a later version with a good status answers it."""
    call = {"id": "c1", "name": "ls", "args": {}}
    other = {"id": "c2", "name": "cat", "args": {}, "status": "success"}
    header = {"sessionId": "s", "projectHash": "p", "startTime": "t"}
    msg = {"id": "m1", "type": "gemini", "content": "x"}
    events, errors = _read(
        header,
        {**msg, "toolCalls": [other, {**call, "status": status}]},
        {**msg, "toolCalls": [other, {**call, "status": "success"}]},
        {"id": "m2", "type": "user", "content": "next"},
    )
    (err,) = errors
    assert (err.location.line, err.location.field) == (2, "toolCalls[1].status")
    assert err.trace_id == "s" and "must be a string" in err.message
    assert [(c.call_id, c.name) for c in _of(events, ToolCall)] == [
        ("c2", "cat"),
        ("c1", "ls"),
    ]
    assert [r.call_id for r in _of(events, ToolResult)] == ["c2", "c1"]
    assert [m.text for m in _of(events, Message)] == ["x", "next"]


def test_a_call_is_answered_when_final_and_usage_takes_the_last_version() -> None:
    """A running call is emitted once, answered at its first final version; held usage uses the last tokens."""
    call = {"id": "c1", "name": "run_shell_command", "args": '{"command": "ls"}'}
    running = {**call, "status": "executing"}
    done = {
        **call,
        "status": "error",
        "result": [{"functionResponse": {"response": {"error": "boom"}}}],
    }
    msg = {
        "id": "m",
        "type": "gemini",
        "content": "hi",
        "tokens": {"input": 5, "output": 1},
    }
    header = {"sessionId": "s", "projectHash": "p", "startTime": "t"}
    events, errors = _read(
        header,
        {**msg, "toolCalls": [running]},
        {"$set": {"lastUpdated": "t2"}},
        {
            **msg,
            "toolCalls": [done],
            "tokens": {"input": 5, "output": 3, "thoughts": 2},
        },
        {
            **msg,
            "toolCalls": [done],
            "tokens": {"input": 7, "output": 4, "thoughts": 2},
        },
        {"id": "u", "type": "user", "content": [{"text": "next"}]},
        {**msg, "tokens": {"input": 500}},
        {"$rewindTo": "m"},
    )
    assert errors == []
    (tc,) = _of(events, ToolCall)
    assert tc.args == {"command": "ls"} and tc.args_raw == call["args"]
    (result,) = _of(events, ToolResult)
    assert result.is_error is True and result.result == "boom"
    (usage,) = _of(events, Usage)
    assert (usage.input_tokens, usage.output_tokens, usage.reasoning_tokens) == (
        7,
        6,
        2,
    )
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("Usage") < kinds.index("Message", kinds.index("ToolResult"))
    assert [m.text for m in _of(events, Message)] == ["hi", "next"]
    assert len(_of(events, TurnStart)) == 1 and {e.trace_id for e in events} == {"s"}


def test_records_without_a_header_use_the_default_trace() -> None:
    """Without a header line the events belong to the source's default trace."""
    events, errors = _read({"id": "e", "type": "error", "content": "quota"})
    assert errors == [] and {e.trace_id for e in events} == {"s.jsonl"}


def test_detection_claims_the_header_line_only() -> None:
    """The header is detected; Claude Code, Codex and one-line session documents are not claimed."""
    header = (FIXTURES / BASE).read_bytes().splitlines()[0]
    assert detect(header) == "gemini-cli-jsonl"
    claude = {"type": "user", "sessionId": "s", "message": {}}
    codex = {"type": "session_meta", "payload": {"id": "s"}}
    document = {"sessionId": "s", "projectHash": "p", "startTime": "t", "messages": []}
    assert not any(FORMAT.sniff(r) for r in (claude, codex, document, [header], "x"))
    assert detect(json.dumps(claude).encode()) == "claude-code"


POLICY = """\
graders:
  - type: tool-calls
    config:
      required: ["^write_file$"]
  - type: token-budget
    config: {max: 500}
"""


@pytest.mark.slow
def test_cli_grades_a_live_transcript_end_to_end(
    run_cli: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    """`trajgrade grade` auto-detects the transcript and grades it under its sessionId, tokens counted once."""
    cfg = tmp_path / "policy.yaml"
    cfg.write_text(POLICY, encoding="utf-8")
    proc = run_cli("grade", "-c", cfg, FIXTURES / BASE)
    assert proc.returncode == 1, proc.stderr
    finals = {
        (v["trace_id"], v["grader"]): (v["outcome"], v["metadata"].get("value"))
        for v in map(json.loads, proc.stdout.splitlines())
        if v["final"]
    }
    sid = "f83041ed-3b64-4cc5-a2d1-3ea5ffa4ce42"
    assert finals == {
        (sid, "tool-calls"): ("pass", None),
        (sid, "token-budget"): ("fail", 5 * 120),
    }
