"""Codex rollouts and `codex exec --json`: the real corpus files, then edge cases."""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.formats._decode import feed_lines

from trajgrade.errors import InputError
from trajgrade.events import (
    AgentError,
    Event,
    Message,
    Projection,
    ToolCall,
    ToolResult,
    TraceStart,
    TurnStart,
    Usage,
)
from trajgrade.formats import detect
from trajgrade.formats.codex import FORMAT, CodexReader
from trajgrade.pipeline.decoder import SourceDecoder

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "codex"
_COUNT = re.compile(r"^(\d+) \(")

LIVE = "live_v0.169.0_rollout.jsonl"
EXEC = "live_v0.169.0_events.jsonl"
DENY = "live_v0.169.0_blocking_json-deny_rollout.jsonl"
DENY_EXEC = "live_v0.169.0_blocking_json-deny_events.jsonl"
ABORTED = "agentcmd_v0.40.0_turn_aborted_123_calls.jsonl.gz"
NO_MARKERS = "codemie_v0.128.0-alpha.1_38_calls.jsonl.gz"
PARALLEL = "localpush_v0.104_redacted_118_calls.jsonl"
DANGLING = "localpush_v0.104_redacted_dangling_call.jsonl"
MCP = "localpush_v0.104_redacted_mcp_calls.jsonl"


def _provenance() -> tuple[dict[str, int], dict[str, str]]:
    """(fixture -> tool-call count, fixture -> sha256 of its corpus file), from SOURCES.md."""
    counts: dict[str, tuple[str, int]] = {}
    shas: dict[str, str] = {}
    header: list[str] = []
    for row in (FIXTURES / "SOURCES.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip().strip("`") for c in row.strip().strip("|").split("|")]
        if "tool calls (detail)" in cells:
            header = cells
        elif len(cells) == 2 and re.fullmatch(r"[0-9a-f]{64}", cells[1]):
            shas[cells[0]] = cells[1]
        elif len(cells) == len(header) and (
            m := _COUNT.match(cells[header.index("tool calls (detail)")])
        ):
            # Corpus rows name the corpus file; live rows the fixture, then it.
            if "corpus file" in header:
                fixture, origin = cells[0], cells[header.index("corpus file")]
            else:
                fixture, origin = cells[0].rsplit("/", 1)[-1], cells[0]
                if (FIXTURES / f"{fixture}.gz").exists():
                    fixture += ".gz"
            counts[fixture] = (origin, int(m[1]))
    on_disk = {p.name for p in FIXTURES.glob("*.jsonl*")}
    assert on_disk == set(counts), "every fixture needs a SOURCES.md row, and back"
    return (
        {f: n for f, (_, n) in counts.items()},
        {f: shas[origin] for f, (origin, _) in counts.items()},
    )


COUNTS, SHAS = _provenance()


def _raw(name: str) -> bytes:
    data = (FIXTURES / name).read_bytes()
    return gzip.decompress(data) if name.endswith(".gz") else data


def _decode(
    data: bytes, chunks: list[int] | None = None
) -> tuple[list[Event], list[InputError]]:
    """Events and errors through the pipeline (detection included), whole or chunked."""
    dec = SourceDecoder("f.jsonl")
    events: list[Event] = []
    errors: list[InputError] = []
    pos = 0
    for size in [*(chunks or []), len(data)]:
        batch = dec.feed(data[pos : pos + size])
        events += batch.events
        errors += batch.errors
        pos += size
    end = dec.close()
    assert dec.format == "codex"
    return events + end.events, errors + end.errors


def _read(data: bytes, chunks: list[int] | None = None) -> list[Event]:
    events, errors = _decode(data, chunks)
    assert not errors
    return events


def _of(events: list[Event], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def _lines(*records: object) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def _env(
    kind: str, payload: dict[str, Any], ts: str = "2026-01-01T00:00:00Z"
) -> dict[str, Any]:
    return {"timestamp": ts, "type": kind, "payload": payload}


def _totals(data: bytes) -> list[dict[str, int]]:
    """Every cumulative total the file writes, read straight from the JSON."""
    out = []
    for line in data.splitlines():
        r = json.loads(line)
        if r.get("type") == "turn.completed":
            out.append(r["usage"])
        info = (
            (r.get("payload") or {}).get("info")
            if r.get("type") == "event_msg"
            else None
        )
        if isinstance(info, dict):
            out.append(info["total_token_usage"])
    return out


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_fixtures_are_the_corpus_files(name: str) -> None:
    """Each fixture (decompressed) has the sha256 SOURCES.md gives for its corpus file."""
    assert hashlib.sha256(_raw(name)).hexdigest() == SHAS[name]


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_tool_call_count_matches_sources(name: str) -> None:
    """Each fixture gives exactly the number of tool calls SOURCES.md lists."""
    assert len(_of(_read(_raw(name)), ToolCall)) == COUNTS[name]


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_results_pair_with_earlier_calls_by_id(name: str) -> None:
    """Every result names an open call of its trace; only the cut-off file keeps one open."""
    open_calls: dict[str, str] = {}
    for e in _read(_raw(name)):
        if isinstance(e, ToolCall) and e.call_id is not None:
            assert e.call_id not in open_calls
            open_calls[e.call_id] = e.trace_id
        elif isinstance(e, ToolResult):
            assert open_calls.pop(e.call_id or "") == e.trace_id
    expected = {"call_UtYwHmwWekzvq83m8Rb9K8jJ"} if name == DANGLING else set()
    assert set(open_calls) == expected


def test_parallel_calls_pair_by_id_not_position() -> None:
    """In the 0.104 file up to 7 calls are open at once and each result still finds its call."""
    open_ids: set[str] = set()
    widest = 0
    for e in _read(_raw(PARALLEL)):
        if isinstance(e, ToolCall):
            open_ids.add(e.call_id or "")
            widest = max(widest, len(open_ids))
        elif isinstance(e, ToolResult):
            open_ids.remove(e.call_id or "")
    assert widest == 7


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_usage_deltas_sum_to_the_last_total(name: str) -> None:
    """Per-response usage is never negative, drops repeats, and sums to the file's last total."""
    data = _raw(name)
    totals = _totals(data)
    usage = _of(_read(data), Usage)
    changes = sum(1 for a, b in zip([None, *totals], totals, strict=False) if a != b)
    assert len(usage) == changes
    for u in usage:
        assert min(u.input_tokens, u.output_tokens, u.cache_read_tokens) >= 0
        assert min(u.reasoning_tokens, u.cache_write_tokens) >= 0
    last = totals[-1] if totals else {}
    assert sum(u.input_tokens for u in usage) == last.get("input_tokens", 0)
    assert sum(u.output_tokens for u in usage) == last.get("output_tokens", 0)
    assert sum(u.cache_read_tokens for u in usage) == last.get("cached_input_tokens", 0)
    assert sum(u.reasoning_tokens for u in usage) == last.get(
        "reasoning_output_tokens", 0
    )


@pytest.mark.parametrize(
    ("name", "turns"),
    [
        (ABORTED, 13),
        (NO_MARKERS, 3),
        (PARALLEL, 1),
        (DANGLING, 1),
        (LIVE, 1),
        (EXEC, 1),
    ],
)
def test_turns_come_from_markers_or_prompts(name: str, turns: int) -> None:
    """0.104+ turns follow task_started; 0.40 and 0.128 fall back to one per prompt."""
    events = _read(_raw(name))
    assert len(_of(events, TurnStart)) == turns
    prompts = [m for m in _of(events, Message) if m.role == "user"]
    assert len(prompts) == (0 if name == EXEC else turns)


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_each_file_is_one_trace_named_by_its_session(name: str) -> None:
    """The trace id is the session (thread) id; a trace_start opens it."""
    events = _read(_raw(name))
    first = json.loads(_raw(name).split(b"\n", 1)[0])
    session = first.get("thread_id") or first["payload"]["id"]
    assert {e.trace_id for e in events} == {session}
    assert isinstance(events[0], TraceStart)


def test_exit_codes_and_refusals_flag_errors() -> None:
    """0.40 exit metadata, sandbox denials and rejected patches are errors; plan updates have no flag."""
    results = _of(_read(_raw(ABORTED)), ToolResult)
    flags = [r.is_error for r in results]
    assert (flags.count(True), flags.count(False), flags.count(None)) == (12, 108, 3)
    first = results[0]
    assert isinstance(first.result, str)
    assert not first.result.startswith('{"output"')
    assert first.duration_ms is not None
    assert {r.result for r in results if r.is_error is None} == {"Plan updated"}


def test_live_rollout_maps_header_exit_codes_and_hook_blocks() -> None:
    """0.169 output headers give is_error and duration; a hook-denied call is an error result."""
    base = _of(_read(_raw(LIVE)), ToolResult)
    assert [r.is_error for r in base] == [False, False, False, True]
    assert all(r.duration_ms is not None for r in base)
    denied = _of(_read(_raw(DENY)), ToolResult)
    assert [r.is_error for r in denied] == [False, True, False, True]
    assert denied[1].result.startswith("Command blocked by PreToolUse hook:")
    calls = _of(_read(_raw(LIVE)), ToolCall)
    assert [c.name for c in calls] == ["exec_command"] * 2 + [
        "apply_patch",
        "exec_command",
    ]
    assert calls[0].args == {"cmd": "echo hello"}
    assert calls[0].args_raw == '{"cmd": "echo hello"}'
    assert calls[2].args is None and calls[2].args_raw.startswith("*** Begin Patch")


def test_exec_stream_maps_items_usage_and_warnings() -> None:
    """`codex exec --json`: items become calls/results/messages, hook-trust notices are warnings."""
    events = _read(_raw(EXEC))
    calls, results = _of(events, ToolCall), _of(events, ToolResult)
    assert [c.name for c in calls] == ["command_execution"] * 2 + [
        "file_change",
        "command_execution",
    ]
    assert calls[0].args == {"command": "/bin/bash -lc 'echo hello'"}
    assert [r.is_error for r in results] == [False, False, False, True]
    assert results[0].result == "hello\n"
    roles = [m.role for m in _of(events, Message)]
    assert roles == ["warning", "warning"] + ["assistant"] * 5
    assert not _of(events, AgentError)
    (usage,) = _of(events, Usage)
    assert (usage.input_tokens, usage.output_tokens) == (500, 100)


def test_mcp_names_are_kept_as_codex_wrote_them() -> None:
    """MCP tools keep their mcp__server__tool names, redacted ones included."""
    names = [c.name for c in _of(_read(_raw(MCP)), ToolCall)]
    assert names.count("mcp__cloud-associates__execute_workflow") == 3
    assert "mcp__cloud-associates__search_workflows" in names
    assert any(n.startswith("[REDACTED_NAME") for n in names)


def test_random_chunks_give_the_same_events() -> None:
    """Lines split at random points across feed() calls decode to the same events."""
    rng = random.Random(5)
    for name in (LIVE, EXEC, MCP, PARALLEL):
        data = _raw(name)
        whole = _read(data)
        chunks = []
        left = len(data)
        while left > 0:
            chunks.append(min(left, rng.randint(1, 3000)))
            left -= chunks[-1]
        assert _read(data, chunks) == whole


_WHOLE_LIVE = _read(_raw(LIVE))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 4000), max_size=40))
def test_any_chunking_of_the_live_rollout_gives_the_same_events(
    cuts: list[int],
) -> None:
    """Whatever the chunk sizes, the events equal those of reading the file whole."""
    assert _read(_raw(LIVE), cuts) == _WHOLE_LIVE


def test_malformed_lines_are_located_and_the_stream_goes_on() -> None:
    """Broken lines are reported with line, field and session; every other line still counts."""
    lines = _raw(LIVE).splitlines(keepends=True)
    bad_call = _env(
        "response_item", {"type": "function_call", "name": 5, "call_id": "x"}
    )
    broken = [
        *lines[:3],
        b'{"timestamp": "2026-11-22T18:40:56Z", "type": "response_item", "payl\n',
        json.dumps(bad_call).encode() + b"\n",
        b"[1, 2]\n",
        *lines[3:],
    ]
    events, errors = _decode(b"".join(broken))
    assert [(e.location.line, e.location.field) for e in errors] == [
        (4, None),
        (5, "payload.name"),
        (6, None),
    ]
    session = "01a2048f-b52b-7c13-b5e0-f96d64b8c0d5"
    assert {e.trace_id for e in errors} == {session}
    assert "not valid JSON" in errors[0].message
    assert "string `name`" in errors[1].message
    assert len(_of(events, ToolCall)) == 4
    assert len(_of(events, ToolResult)) == 4


@pytest.mark.parametrize("kind", [{}, [], 3], ids=["object", "array", "number"])
def test_an_event_msg_type_that_is_not_a_string_is_a_located_error(
    kind: object,
) -> None:
    """``event_msg`` types Codex does not write are skipped, but a type that
    is not a string is bad input: an error at its line and ``payload.type``,
    charged to the session; every other line still counts."""
    lines = _raw(LIVE).splitlines(keepends=True)
    odd = _env("event_msg", {"type": "added_in_a_later_version"})
    bad = _env("event_msg", {"type": kind})
    data = b"".join([*lines[:3], _lines(odd), _lines(bad), *lines[3:]])
    events, errors = _decode(data)
    (err,) = errors
    assert (err.location.line, err.location.field) == (5, "payload.type")
    assert err.trace_id == "01a2048f-b52b-7c13-b5e0-f96d64b8c0d5"
    assert "type must be a string" in err.message
    assert events == _WHOLE_LIVE


def test_durations_too_large_for_a_float_are_left_unset() -> None:
    """A wrapped output's ``duration_seconds`` or a ``Wall time`` past a
    float's range gives no duration (it raised OverflowError)."""
    wrapped = '{"output":"a","metadata":{"exit_code":0,"duration_seconds":%s}}'
    outputs = [
        wrapped % ("1" + "0" * 400),
        wrapped % "1e308",
        "Exit code: 0\nWall time: " + "9" * 400 + " seconds\nOutput:\nok",
    ]
    data = _lines(
        _env("session_meta", {"id": "s"}),
        *(
            _env(
                "response_item",
                {"type": "function_call_output", "call_id": f"c{i}", "output": out},
            )
            for i, out in enumerate(outputs)
        ),
    )
    results = _of(_read(data), ToolResult)
    assert [(r.is_error, r.duration_ms) for r in results] == [(False, None)] * 3


def test_line_numbers_name_each_event_line() -> None:
    """The reader reports the source line of every event it emits."""
    reader = CodexReader(source="r.jsonl", default_trace="r")
    data = _raw(DANGLING)
    events, errors, lines = feed_lines(reader, data)
    assert not errors and lines is not None and len(lines) == len(events)
    raw_lines = data.split(b"\n")
    for event, n in zip(events, lines, strict=True):
        if isinstance(event, ToolCall):
            assert b'"function_call"' in raw_lines[n - 1]


def test_totals_that_repeat_or_go_down_never_give_negative_usage() -> None:
    """Repeats are dropped; a total lower than the last one restarts the count."""

    def count(i: int, o: int) -> dict[str, Any]:
        total = {"input_tokens": i, "output_tokens": o}
        return _env(
            "event_msg", {"type": "token_count", "info": {"total_token_usage": total}}
        )

    data = _lines(
        _env("session_meta", {"id": "s"}),
        _env("event_msg", {"type": "token_count", "info": None}),
        count(100, 10),
        count(150, 12),
        count(150, 12),
        count(40, 5),  # a resumed session restarted its counters
        count(60, 5),
    )
    usage = [(u.input_tokens, u.output_tokens) for u in _of(_read(data), Usage)]
    assert usage == [(100, 10), (50, 2), (40, 5), (20, 0)]


def test_bad_token_counts_are_errors_of_the_session() -> None:
    """A token total with a non-integer count is reported at its field."""
    data = _lines(
        _env("session_meta", {"id": "s"}),
        _env(
            "event_msg",
            {
                "type": "token_count",
                "info": {"total_token_usage": {"input_tokens": "9"}},
            },
        ),
    )
    _, errors = _decode(data)
    (err,) = errors
    assert err.location.field == "payload.info.total_token_usage.input_tokens"
    assert err.trace_id == "s"


def test_sessions_in_one_file_are_separate_traces() -> None:
    """A second session_meta starts a new trace with fresh turn and usage state."""
    usage = {"total_token_usage": {"input_tokens": 10, "output_tokens": 1}}
    session = [
        _env("event_msg", {"type": "task_started", "turn_id": "t1"}),
        _env("event_msg", {"type": "user_message", "message": "hi"}),
        _env("event_msg", {"type": "token_count", "info": usage}),
    ]
    data = _lines(
        _env("session_meta", {"id": "a", "cli_version": "0.104.0"}),
        *session,
        _env("session_meta", {"id": "b"}),
        *session,
    )
    events = _read(data)
    for tid in ("a", "b"):
        mine = [e for e in events if e.trace_id == tid]
        assert [type(e).__name__ for e in mine] == [
            "TraceStart",
            "TurnStart",
            "Message",
            "Usage",
        ]
    assert events[0] == TraceStart(
        trace_id="a", ts=1767225600.0, metadata={"cli_version": "0.104.0"}
    )


def test_prompts_open_turns_only_without_markers() -> None:
    """With task_started, a steering prompt inside the turn opens no second turn."""
    data = _lines(
        _env("session_meta", {"id": "s"}),
        _env("event_msg", {"type": "task_started", "turn_id": "t1"}),
        _env("event_msg", {"type": "user_message", "message": "go"}),
        _env("turn_context", {"turn_id": "t1"}),
        _env("event_msg", {"type": "user_message", "message": "also this"}),
        _env("turn_context", {"turn_id": "t2"}),  # a turn with no task_started
        _env("event_msg", {"type": "turn_aborted", "reason": "interrupted"}),
    )
    events = _read(data)
    assert [type(e).__name__ for e in events] == [
        "TraceStart",
        "TurnStart",
        "Message",
        "Message",
        "TurnStart",
    ]


def test_envelope_user_items_and_repeated_events_are_not_doubled() -> None:
    """Prompts come from one record kind; injected user items and echoes are skipped."""
    item = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "go"}],
    }
    data = _lines(
        _env("session_meta", {"id": "s"}),
        _env(
            "response_item",
            {
                **item,
                "content": [{"type": "input_text", "text": "<environment_context>"}],
            },
        ),
        _env("response_item", item),
        _env("event_msg", {"type": "user_message", "message": "go", "kind": "plain"}),
        _env(
            "event_msg",
            {
                "type": "item_completed",
                "item": {
                    "type": "UserMessage",
                    "content": [{"type": "text", "text": "go"}],
                },
            },
        ),
        _env(
            "event_msg",
            {
                "type": "user_message",
                "message": "<user_instructions>",
                "kind": "user_instructions",
            },
        ),
        _env("event_msg", {"type": "agent_message", "message": "ok"}),
        _env(
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "ok"}],
            },
        ),
        _env(
            "response_item",
            {"type": "reasoning", "summary": [], "encrypted_content": "x"},
        ),
        _env(
            "compacted",
            {
                "message": "",
                "replacement_history": [
                    {
                        "type": "function_call",
                        "name": "shell",
                        "arguments": "{}",
                        "call_id": "c",
                    }
                ],
            },
        ),
    )
    events = _read(data)
    assert [(type(e).__name__, getattr(e, "role", None)) for e in events] == [
        ("TraceStart", None),
        ("TurnStart", None),
        ("Message", "user"),
        ("Message", "assistant"),
    ]


def test_builtin_and_custom_tool_items_become_calls() -> None:
    """local_shell_call, web_search_call and custom_tool_call map to calls; errors and outputs pair."""
    data = _lines(
        _env("session_meta", {"id": "s"}),
        _env(
            "response_item",
            {
                "type": "local_shell_call",
                "call_id": "ls1",
                "status": "completed",
                "action": {"type": "exec", "command": ["ls"]},
            },
        ),
        _env(
            "response_item",
            {
                "type": "function_call_output",
                "call_id": "ls1",
                "output": "Exit code: 1\nWall time: 0.5 seconds\nOutput:\nnope",
            },
        ),
        _env(
            "response_item",
            {
                "type": "web_search_call",
                "status": "completed",
                "action": {"type": "search", "query": "q"},
            },
        ),
        _env(
            "response_item",
            {
                "type": "custom_tool_call",
                "name": "apply_patch",
                "call_id": "p1",
                "input": "*** Begin Patch",
            },
        ),
        _env(
            "response_item",
            {
                "type": "custom_tool_call_output",
                "call_id": "p1",
                "output": "patch rejected by user",
            },
        ),
        _env("event_msg", {"type": "error", "message": "context window exceeded"}),
    )
    events = _read(data)[1:]
    assert events == [
        ToolCall(
            trace_id="s",
            ts=1767225600.0,
            name="local_shell",
            call_id="ls1",
            args={"type": "exec", "command": ["ls"]},
        ),
        ToolResult(
            trace_id="s",
            ts=1767225600.0,
            call_id="ls1",
            result="Exit code: 1\nWall time: 0.5 seconds\nOutput:\nnope",
            is_error=True,
            duration_ms=500.0,
        ),
        ToolCall(
            trace_id="s",
            ts=1767225600.0,
            name="web_search",
            args={"type": "search", "query": "q"},
        ),
        ToolCall(
            trace_id="s",
            ts=1767225600.0,
            name="apply_patch",
            call_id="p1",
            args_raw="*** Begin Patch",
        ),
        ToolResult(
            trace_id="s",
            ts=1767225600.0,
            call_id="p1",
            result="patch rejected by user",
            is_error=True,
        ),
        AgentError(trace_id="s", ts=1767225600.0, message="context window exceeded"),
    ]


def test_bare_layout_header_names_the_trace() -> None:
    """A pre-envelope rollout: header, state markers and bare items, user items as prompts."""
    data = _lines(
        {
            "id": "old-1",
            "timestamp": "2025-08-01T10:00:00Z",
            "instructions": None,
            "git": {"branch": "main"},
        },
        {"record_type": "state"},
        {
            "type": "message",
            "role": "user",
            "content": [
                {
                    "type": "input_text",
                    "text": "<environment_context>cwd</environment_context>",
                }
            ],
        },
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "fix it"}],
        },
        {
            "type": "function_call",
            "name": "shell",
            "arguments": '{"command": ["ls"]}',
            "call_id": "c1",
        },
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": '{"output":"a\\n","metadata":{"exit_code":0,"duration_seconds":0.1}}',
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "done"}],
        },
    )
    events = _read(data)
    assert detect(data.split(b"\n", 1)[0]) == "codex"
    assert events == [
        TraceStart(
            trace_id="old-1", ts=1754042400.0, metadata={"git": {"branch": "main"}}
        ),
        TurnStart(trace_id="old-1", source="user"),
        Message(trace_id="old-1", role="user", text="fix it"),
        ToolCall(
            trace_id="old-1",
            name="shell",
            call_id="c1",
            args={"command": ["ls"]},
            args_raw='{"command": ["ls"]}',
        ),
        ToolResult(
            trace_id="old-1",
            call_id="c1",
            result="a\n",
            is_error=False,
            duration_ms=100.0,
        ),
        Message(trace_id="old-1", role="assistant", text="done"),
    ]


def test_exec_failures_unfinished_items_and_mcp_calls() -> None:
    """turn.failed and error lines are errors; a started item never completed stays unanswered."""
    mcp = {
        "id": "item_2",
        "type": "mcp_tool_call",
        "server": "docs",
        "tool": "search",
        "arguments": {"q": "x"},
        "status": "failed",
        "error": {"message": "boom"},
    }
    data = _lines(
        {"type": "thread.started", "thread_id": "th"},
        {"type": "turn.started"},
        {"type": "item.completed", "item": mcp},
        {
            "type": "item.started",
            "item": {
                "id": "item_3",
                "type": "command_execution",
                "command": "sleep 9",
                "aggregated_output": "",
                "exit_code": None,
                "status": "in_progress",
            },
        },
        {
            "type": "item.updated",
            "item": {"id": "item_4", "type": "todo_list", "items": []},
        },
        {"type": "error", "message": "stream disconnected"},
        {"type": "turn.failed", "error": {"message": "usage limit"}},
    )
    events = _read(data)
    assert events == [
        TraceStart(trace_id="th"),
        TurnStart(trace_id="th"),
        ToolCall(
            trace_id="th", name="mcp__docs__search", call_id="item_2", args={"q": "x"}
        ),
        ToolResult(
            trace_id="th", call_id="item_2", result={"message": "boom"}, is_error=True
        ),
        ToolCall(
            trace_id="th",
            name="command_execution",
            call_id="item_3",
            args={"command": "sleep 9"},
        ),
        AgentError(trace_id="th", message="stream disconnected"),
        AgentError(trace_id="th", message="usage limit", code="turn_failed"),
    ]


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_detects_every_fixture(name: str) -> None:
    """The first line of every fixture is detected as codex."""
    assert detect(_raw(name).split(b"\n", 1)[0]) == "codex"


@pytest.mark.parametrize(
    "record",
    [
        {"type": "error", "message": "x"},  # canonical error event
        {"type": "function_call", "name": "f", "call_id": "c", "arguments": "{}"},
        {"type": "message", "role": "user", "content": "hi"},
        {"object": "response", "id": "resp_1", "output": []},
        {
            "type": "user",
            "sessionId": "s",
            "message": {"role": "user", "content": "hi"},
        },
        {"type": "tool_call", "name": "bash", "trace_id": "t"},
        {"type": "session_meta"},  # no payload
        {"id": "x", "timestamp": "2026-01-01T00:00:00Z"},  # no header fields
        [{"type": "function_call"}],
    ],
)
def test_does_not_claim_other_records(record: object) -> None:
    """Canonical events, Responses items and other agents' lines are not Codex."""
    assert not FORMAT.sniff(msgspec.json.decode(json.dumps(record)))


POLICY = """\
graders:
  - type: tool-calls
    config:
      required: ["^exec_command$"]
      disallowed: ["^mcp__"]
  - type: token-budget
    config: {max: 200000}
"""


@pytest.mark.slow
def test_cli_grades_codex_logs_end_to_end(run_cli, tmp_path: Path) -> None:
    """`trajgrade grade` detects Codex rollouts and grades each session by its id."""
    cfg = tmp_path / "policy.yaml"
    cfg.write_text(POLICY, encoding="utf-8")
    proc = run_cli("grade", "-c", cfg, FIXTURES / LIVE, FIXTURES / MCP)
    assert proc.returncode == 1, proc.stderr
    finals = {
        (v["trace_id"][:13], v["grader"]): (v["outcome"], v["metadata"].get("value"))
        for v in map(json.loads, proc.stdout.splitlines())
        if v["final"]
    }
    assert finals == {
        ("01a2048f-b52b", "tool-calls"): ("pass", None),
        ("01a2048f-b52b", "token-budget"): ("pass", 600),
        ("019c8bfe-ec25", "tool-calls"): ("fail", None),
        ("019c8bfe-ec25", "token-budget"): ("fail", 299496),
    }


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
_KEYS = st.sampled_from(
    [
        "type", "payload", "id", "call_id", "name", "arguments", "input", "output",
        "role", "content", "summary", "action", "info", "total_token_usage",
        "input_tokens", "turn_id", "message", "item", "status", "usage", "error",
        "thread_id", "timestamp", "kind", "server", "tool", "exit_code",
    ]
)  # fmt: skip
_TYPES = st.sampled_from(
    [
        "session_meta", "response_item", "event_msg", "turn_context", "compacted",
        "function_call", "function_call_output", "custom_tool_call", "message",
        "reasoning", "local_shell_call", "web_search_call", "token_count",
        "user_message", "task_started", "item_completed", "UserMessage", "error",
        "thread.started", "turn.started", "turn.completed", "turn.failed",
        "item.started", "item.completed", "command_execution", "mcp_tool_call",
        "file_change", "web_search", "collab_tool_call", "agent_message",
    ]
)  # fmt: skip
_NODES = st.recursive(
    _JSON_VALUES | _TYPES,
    lambda inner: (
        st.dictionaries(_KEYS, inner, max_size=6).map(
            lambda d: d if "type" in d else {**d, "type": None}
        )
        | st.fixed_dictionaries(
            {"type": _TYPES}, optional={"payload": inner, "item": inner}
        )
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_NODES, min_size=1, max_size=8))
def test_random_records_never_crash_the_reader(records: list[Any]) -> None:
    """Any JSON lines give events or located input errors, never an exception."""
    reader = CodexReader(source="r.jsonl", default_trace="r")
    events, errors, lines = feed_lines(reader, _lines(*records))
    assert lines is not None and len(lines) == len(events)
    assert all(e.location.line is not None for e in errors)
    assert all(FORMAT.sniff(r) in (True, False) for r in records)


@pytest.mark.parametrize(
    "name", sorted(p.name for p in FIXTURES.glob("*.jsonl*")), ids=str
)
def test_results_unread_by_every_grader_are_left_unbuilt(name: str) -> None:
    """With no grader reading ``ToolResult.result`` (projection), Codex
    results carry the same call ids, error flags and durations, and every
    other event is the same; only ``result`` is None."""
    data = _raw(name)

    def events(*, results: bool) -> list[Any]:
        dec = SourceDecoder(
            "r.jsonl", fmt="codex", projection=Projection(tool_results=results)
        )
        batch, end = dec.feed(data), dec.close()
        assert not batch.errors and not end.errors
        return batch.events + end.events

    full = events(results=True)
    projected = events(results=False)
    assert len(projected) == len(full)
    for p, f in zip(projected, full, strict=True):
        if isinstance(f, ToolResult):
            assert msgspec.structs.replace(p, result=f.result) == f
            # Rollout outputs are left unbuilt (exec items are decoded whole
            # with their line anyway and keep theirs).
            assert p.result is None or (
                name.endswith("_events.jsonl") and p.result == f.result
            )
        else:
            assert p == f
    if name.startswith("agentcmd"):
        # Wrapped (<= 0.40) outputs: the status is read without the text.
        results = [e for e in full if isinstance(e, ToolResult)]
        assert any(e.result is not None for e in results)
        assert any(
            e.is_error is not None and e.duration_ms is not None for e in results
        )
