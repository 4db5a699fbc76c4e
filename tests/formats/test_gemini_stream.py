"""Gemini CLI stream-json output: the live 0.61.0 recordings, then edge cases."""

from __future__ import annotations

import random
import re
from collections import Counter
from pathlib import Path

import pytest
from tests.formats._decode import decode

from trajgrade.events import (
    Message,
    ToolCall,
    ToolResult,
    TraceEnd,
    TraceStart,
    TurnStart,
    Usage,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gemini-cli-live"
FMT = "gemini-stream-json"
SESSION = "f83041ed-3b64-4cc5-a2d1-3ea5ffa4ce42"


def _provenance() -> dict[str, tuple[int, int, int]]:
    """stream file -> (tool calls, ok results, error results) from SOURCES.md."""
    rows = {}
    for row in (FIXTURES / "SOURCES.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) == 6 and (m := re.fullmatch(r"(\d+) / (\d+)", cells[4])):
            rows[cells[0].strip("`")] = (int(cells[3]), int(m[1]), int(m[2]))
    return rows


SOURCES = _provenance()


def test_provenance_table_lists_the_stream_fixtures() -> None:
    assert sorted(SOURCES) == sorted(p.name for p in FIXTURES.glob("*.stream.jsonl"))


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_recordings_match_their_provenance(name: str) -> None:
    events, errors = decode((FIXTURES / name).read_bytes(), fmt=FMT)
    assert errors == []
    calls, ok, failed = SOURCES[name]
    assert sum(type(e) is ToolCall for e in events) == calls
    results = [e for e in events if type(e) is ToolResult]
    assert Counter(bool(r.is_error) for r in results) == Counter(
        {False: ok, True: failed} if failed else {False: ok}
    )
    # Results pair by id with a call of the same trace.
    ids = {e.call_id for e in events if type(e) is ToolCall}
    assert all(r.call_id in ids for r in results)
    assert len({e.trace_id for e in events}) == 1


def test_base_run_maps_every_record() -> None:
    events, _ = decode((FIXTURES / "base.stream.jsonl").read_bytes(), fmt=FMT)
    assert type(events[0]) is TraceStart
    assert events[0].trace_id == SESSION
    assert events[0].metadata == {"model": "auto"}
    assert [e.role for e in events if type(e) is Message] == ["user"] + [
        "assistant"
    ] * 5
    assert sum(type(e) is TurnStart for e in events) == 5
    calls = [e for e in events if type(e) is ToolCall]
    assert calls[0].name == "run_shell_command"
    assert calls[0].args == {"command": "echo hello", "description": "Print hello"}
    first = next(e for e in events if type(e) is ToolResult)
    assert (first.name, first.result, first.is_error) == (
        "run_shell_command",
        "hello",
        False,
    )
    usage = [e for e in events if type(e) is Usage]
    assert [(u.input_tokens, u.output_tokens) for u in usage] == [(600, 120)]
    assert type(events[-1]) is TraceEnd
    assert events[-1].is_error is False


def test_assistant_deltas_are_one_message_per_response() -> None:
    data = (
        b'{"type":"init","session_id":"s","model":"m"}\n'
        b'{"type":"message","role":"assistant","content":"Hel","delta":true}\n'
        b'{"type":"message","role":"assistant","content":"lo","delta":true}\n'
        b'{"type":"tool_use","tool_name":"t","tool_id":"a","parameters":{}}\n'
        b'{"type":"message","role":"assistant","content":" more","delta":true}\n'
    )
    events, errors = decode(data, fmt=FMT)
    assert errors == []
    texts = [e.text for e in events if type(e) is Message]
    assert texts == ["Hello", " more"]  # the last one flushed at end of input
    assert sum(type(e) is TurnStart for e in events) == 1


def test_chunking_does_not_change_events() -> None:
    data = (FIXTURES / "exit2.stream.jsonl").read_bytes()
    whole, _ = decode(data, fmt=FMT)
    rng = random.Random(5)
    for _ in range(20):
        cuts = [rng.randint(1, 200) for _ in range(rng.randint(1, 30))]
        assert decode(data, fmt=FMT, chunks=cuts)[0] == whole


def test_bad_records_are_located_and_reading_goes_on() -> None:
    data = (
        b'{"type":"init","session_id":"s","model":"m"}\n'
        b'{"type":"tool_use","tool_id":"a","parameters":{}}\n'
        b"[1]\n"
        b'{"type":"result","status":"error","stats":{"input_tokens":-1}}\n'
        b'{"type":"tool_use","tool_name":"ok","tool_id":"b"}\n'
    )
    events, errors = decode(data, fmt=FMT, source="g.jsonl")
    assert [(e.location.line, e.location.field, e.trace_id) for e in errors] == [
        (2, "tool_name", "s"),
        (3, None, "s"),
        (4, "stats.input_tokens", "s"),
    ]
    assert [e.name for e in events if type(e) is ToolCall] == ["ok"]
    end = next(e for e in events if type(e) is TraceEnd)
    assert end.is_error is True
