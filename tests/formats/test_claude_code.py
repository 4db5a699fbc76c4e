"""Claude Code transcripts and stream-json: the real corpus files, then edge cases."""

from __future__ import annotations

import gzip
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests._support import suite
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
from trajgrade.formats.claude_code import FORMAT, ClaudeCodeReader
from trajgrade.pipeline.decoder import SourceDecoder
from trajgrade.pipeline.whole import grade_bytes

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "claude-code"
_COUNTS = re.compile(r"^(\d+) \((\d+) results, (\d+) is_error, (\d+) unanswered\)$")


def _provenance() -> dict[str, tuple[int, int, int, int]]:
    """fixture name -> (calls, results, is_error, unanswered), from its SOURCES.md."""
    counts: dict[str, tuple[int, int, int, int]] = {}
    copied: dict[str, str] = {}
    for row in (FIXTURES / "SOURCES.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) == 10 and (m := _COUNTS.match(cells[7])):
            counts[cells[0].strip("`")] = (
                int(m[1]),
                int(m[2]),
                int(m[3]),
                int(m[4]),
            )
        elif len(cells) == 2 and cells[0].startswith("`") and "/" not in cells[0]:
            copied[cells[0].strip("`")] = cells[1].split("`")[1]
    return {fixture: counts[origin] for fixture, origin in copied.items()}


SOURCES = _provenance()
LONG = "spotter_v2.1.39_long_session.jsonl.gz"
SUBAGENT = "spotter_v2.1.39_long_session.subagent.jsonl"
STREAM = "live_v2.1.197_stream.jsonl"

#: The human prompts of each file, read by eye (line numbers in the comments).
PROMPTS: dict[str, list[str]] = {
    "agentcmd_v2.0.14_trailing_unanswered_calls.jsonl": ["Hey", "Can you audit"],
    "agentcmd_v2.0.26_plan_mode.jsonl": [  # not 2-4 (/clear), 12, 23 (interrupts)
        "please move the + button",
        "not the new session button",
        "Completely outside the search bar",
        "let's give the button a background",
    ],
    "agentcmd_v2.0.28_websearch_summaries.jsonl": ["search the web"],
    "codemie_v2.0.64_small.jsonl": ["create hello.py", "update py", "delete js"],
    "codemie_v2.1.4_interrupted.jsonl": ["show tools", "explore more", "what else?"],
    "spotter_v2.1.38_short_tool_errors.jsonl": ["mix phx.server"],
    "spotter_v2.1.38_tool_heavy.jsonl": ["start phoenix", "scrolling back"],
    LONG: ["Work on bead spotter-dov", "continue"],  # not 755 (summary), 1502 (task)
    SUBAGENT: [],  # its first line is the parent agent's task, not a person's
    "live_v2.1.197_transcript.jsonl": ["do the task"],
    "live_v2.1.331_transcript.jsonl": ["do the task"],
}


def _raw(name: str) -> bytes:
    data = (FIXTURES / name).read_bytes()
    return gzip.decompress(data) if name.endswith(".gz") else data


def _read(data: bytes, chunks: list[int] | None = None) -> list[Event]:
    """Decode through the pipeline (detection included), whole or in chunks."""
    dec = SourceDecoder("f.jsonl")
    events: list[Event] = []
    errors: list[InputError] = []
    pos = 0
    for size in chunks or [len(data)]:
        batch = dec.feed(data[pos : pos + size])
        events += batch.events
        errors += batch.errors
        pos += size
    batch = dec.feed(data[pos:])
    end = dec.close()
    assert dec.format == "claude-code"
    assert not errors + batch.errors + end.errors
    return events + batch.events + end.events


def _of(events: list[Event], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_tool_calls_results_and_errors_match_sources(name: str) -> None:
    """Each fixture gives the calls, results, is_error and unanswered counts of SOURCES.md."""
    events = _read(_raw(name))
    calls, results = _of(events, ToolCall), _of(events, ToolResult)
    unanswered = {c.call_id for c in calls} - {r.call_id for r in results}
    assert (
        len(calls),
        len(results),
        sum(r.is_error for r in results),
        len(unanswered),
    ) == SOURCES[name]


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_every_result_pairs_with_an_earlier_call(name: str) -> None:
    """A tool_result follows the tool_call with its id (no file here has orphan results)."""
    called: set[str] = set()
    for e in _read(_raw(name)):
        if isinstance(e, ToolCall):
            called.add(e.call_id)
        elif isinstance(e, ToolResult):
            assert e.call_id in called


def _tokens(data: bytes) -> tuple[list[int], int]:
    """Token sums counted independently: the last usage per message id, or a
    stream-json result's totals; and how many responses there are."""
    last: dict[str, dict[str, int]] = {}
    final = None
    for line in data.splitlines():
        rec = json.loads(line)
        if rec.get("type") == "assistant":
            last[rec["message"]["id"]] = rec["message"]["usage"]
        elif rec.get("type") == "result":
            final = rec["usage"]
    sums = [0, 0, 0, 0]
    for u in [final] if final else last.values():
        read, write = u["cache_read_input_tokens"], u["cache_creation_input_tokens"]
        for i, v in enumerate(
            (u["input_tokens"] + read + write, u["output_tokens"], read, write)
        ):
            sums[i] += v
    return sums, len(last) + (final is not None)


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_usage_is_counted_once_per_response(name: str) -> None:
    """Usage events add up to the distinct-message-id totals, one event per response."""
    data = _raw(name)
    usage = _of(_read(data), Usage)
    expected, responses = _tokens(data)
    got = [
        sum(u.input_tokens for u in usage),
        sum(u.output_tokens for u in usage),
        sum(u.cache_read_tokens for u in usage),
        sum(u.cache_write_tokens for u in usage),
    ]
    assert (got, len(usage)) == (expected, responses)


@pytest.mark.parametrize("name", sorted(PROMPTS))
def test_turns_follow_human_prompts(name: str) -> None:
    """One turn_start per human prompt; injected, meta and sidechain user lines open none."""
    events = _read(_raw(name))
    prompts = [e.text for e in _of(events, Message) if e.role == "user"]
    assert len(_of(events, TurnStart)) == len(PROMPTS[name]) == len(prompts)
    assert all(
        p.startswith(want) for p, want in zip(prompts, PROMPTS[name], strict=True)
    )


def test_subagent_echoes_are_skipped_and_its_own_calls_are_attributed() -> None:
    """The 33 calls echoed in agent_progress lines are not the parent's; the
    subagent's file has them with agent set, and both files grade as one trace."""
    parent, child = _raw(LONG), _raw(SUBAGENT)
    echoed = set()
    for line in parent.splitlines():
        rec = json.loads(line)
        if rec["type"] == "progress" and rec["data"]["type"] == "agent_progress":
            blocks = rec["data"]["message"]["message"]["content"]
            echoed |= {b["id"] for b in blocks if b["type"] == "tool_use"}
    own = _of(_read(parent), ToolCall)
    theirs = _of(_read(child), ToolCall)
    assert len(echoed) == 33 and echoed == {c.call_id for c in theirs}
    assert not echoed & {c.call_id for c in own}
    assert {c.agent for c in own} == {None} and {c.agent for c in theirs} == {"a2898e3"}
    policy = suite("graders:\n  - type: tool-call-count\n    config: {max: 1000}\n")
    result = grade_bytes(policy, [parent, child])
    assert not result.errors and not result.anomalies  # no call id seen twice
    (v,) = result.verdicts
    assert (v.trace_id, v.metadata["value"]) == (
        "4d5611e5-241a-462a-8d15-5122611a9569",
        183,
    )


def test_stream_json_run_is_one_trace_ended_by_its_result() -> None:
    """init opens the trace and its turn; result adds the uncounted tokens and cost, then ends it."""
    events = _read(_raw(STREAM))
    tid = "837bc8f9-2f48-4ff9-a9c7-d83735145d09"
    assert events[:2] == [
        TraceStart(
            trace_id=tid,
            metadata={
                "model": "claude-opus-4-8[1m]",
                "cwd": "/tmp/agentrun/runs/cc-base/work",
                "claude_code_version": "2.1.197",
            },
        ),
        TurnStart(trace_id=tid, source="user"),
    ]
    # The reported total ($0.005) would count the session twice on top of the
    # usage of its assistant lines: the remaining tokens are priced instead.
    assert events[-2:] == [
        Usage(trace_id=tid, output_tokens=95, model="claude-opus-4-8"),
        TraceEnd(trace_id=tid, result="done", is_error=False),
    ]
    stopped = _read(_raw("live_v2.1.197_blocking_continue-false_stream.jsonl"))
    assert stopped[-1] == TraceEnd(
        trace_id=stopped[-1].trace_id, result="", is_error=False
    )


def test_hook_blocked_call_is_an_error_result() -> None:
    """A PreToolUse hook's exit 2 reaches the graders as an is_error tool_result."""
    results = _of(_read(_raw("live_v2.1.197_blocking_exit2_stream.jsonl")), ToolResult)
    assert [r.is_error for r in results] == [False, True, False, True]
    assert results[1].result.startswith("PreToolUse:Bash hook error")


@pytest.mark.parametrize("name", [STREAM, "codemie_v2.1.4_interrupted.jsonl", LONG])
def test_random_chunks_give_the_same_events(name: str) -> None:
    """Lines cut at random points across feed() calls decode to the same events."""
    data = _raw(name)
    whole = _read(data)
    rng = random.Random(name)
    for _ in range(3):
        chunks = []
        while sum(chunks) < len(data):
            chunks.append(rng.randint(1, 1 << rng.randint(1, 16)))
        assert _read(data, chunks) == whole


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 2000), max_size=60))
def test_any_chunking_of_a_small_session_gives_the_same_events(
    chunks: list[int],
) -> None:
    """Whatever the chunk boundaries, a session decodes to the events of reading it whole."""
    data = _raw("codemie_v2.0.64_small.jsonl")
    assert _read(data, chunks) == _read(data)


def test_malformed_lines_are_located_and_the_stream_goes_on() -> None:
    """A cut line and a wrong field type are errors at their line (and field) that taint the session; later lines are read."""
    lines = _raw("codemie_v2.0.64_small.jsonl").splitlines(keepends=True)
    sid = "4c2ddfdc-b619-4525-8d03-1950fb1b0257"
    lines[2] = lines[2][:40] + b"\n"  # the session id is cut off, too
    bad = json.loads(lines[3])
    bad["message"]["content"][0]["name"] = 5
    lines[3] = json.dumps(bad).encode() + b"\n"
    dec = SourceDecoder("s.jsonl")
    batch = dec.feed(b"".join(lines))
    batch.events += dec.close().events
    errors = batch.errors
    assert [(e.location.line, e.location.field, e.trace_id) for e in errors] == [
        (3, None, sid),
        (4, "message.content[0].name", sid),
    ]
    assert "not valid JSON" in errors[0].message
    assert errors[1].message.startswith("Expected `str | null`, got `int`")
    assert len(_of(batch.events, ToolCall)) == 6 - 1
    assert batch.line_of(batch.events.index(_of(batch.events, ToolCall)[0])) > 4


# ------------------------------------------------------------------ edge cases
SID = "s1"


def _line(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "sessionId": SID, **fields}


def _assistant(
    mid: str, block: dict[str, Any], out: int = 1, **kw: Any
) -> dict[str, Any]:
    usage = {"input_tokens": 3, "output_tokens": out, "cache_read_input_tokens": 10}
    msg = {"id": mid, "content": [block], "usage": usage}
    return _line("assistant", message=msg, **kw)


def _user(content: Any, **kw: Any) -> dict[str, Any]:
    return _line("user", message={"role": "user", "content": content}, **kw)


def _feed(*records: dict[str, Any]) -> tuple[list[Event], list[int], list[Event]]:
    reader = ClaudeCodeReader(source="r.jsonl", default_trace="r")
    buf = b"".join(json.dumps(r).encode() + b"\n" for r in records)
    events, errors, lines = feed_lines(reader, buf)
    assert not errors and lines is not None
    return events, lines, reader.close()[0]


def test_usage_waits_for_the_response_to_complete() -> None:
    """A response's usage is emitted once, with its last line's numbers, when the next response starts."""
    text = {"type": "text", "text": "hi"}
    use = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}
    events, lines, rest = _feed(
        _assistant("m1", text),
        _user([result]),
        _assistant("m1", use, out=20),
        _assistant("m2", text, out=5),
    )
    usage = _of(events, Usage)
    assert [(u.output_tokens, lines[events.index(u)]) for u in usage] == [(20, 4)]
    assert usage[0].input_tokens == 13 and usage[0].cache_read_tokens == 10
    assert [u.output_tokens for u in _of(rest, Usage)] == [5]


def test_blocks_map_to_calls_messages_and_errors() -> None:
    """MCP names and inputs are kept as written; a string input is raw and parsed;
    thinking is reasoning; an API-error line is an error; sidechain calls name their agent."""
    events, _, _ = _feed(
        _assistant("m1", {"type": "thinking", "thinking": "hmm", "signature": "x"}),
        _assistant(
            "m1",
            {"type": "tool_use", "id": "a", "name": "mcp__gh__pr", "input": {"n": 1}},
        ),
        _assistant(
            "m2", {"type": "tool_use", "id": "b", "name": "Task", "input": '{"p": 2}'}
        ),
        _assistant(
            "m3",
            {"type": "text", "text": "API Error: 529"},
            isApiErrorMessage=True,
            error="overloaded",
        ),
        _assistant(
            "m4",
            {"type": "tool_use", "id": "c", "name": "Read"},
            isSidechain=True,
            agentId="ag1",
        ),
    )
    assert [e for e in events if not isinstance(e, Usage)] == [
        Message(trace_id=SID, role="reasoning", text="hmm"),
        ToolCall(trace_id=SID, name="mcp__gh__pr", call_id="a", args={"n": 1}),
        ToolCall(
            trace_id=SID, name="Task", call_id="b", args={"p": 2}, args_raw='{"p": 2}'
        ),
        AgentError(trace_id=SID, message="API Error: 529", code="overloaded"),
        ToolCall(trace_id=SID, name="Read", call_id="c", agent="ag1"),
    ]


def test_injected_user_lines_open_no_turn() -> None:
    """Meta, command, marker, compaction, notification and sidechain lines are not prompts."""
    events, _, _ = _feed(
        _user("Caveat: local commands", isMeta=True),
        _user("<command-name>/clear</command-name>"),
        _user([{"type": "text", "text": "[Request interrupted by user]"}]),
        _user("This session is being continued", isCompactSummary=True),
        _user("<task-notification>done</task-notification>"),
        _user("explore the repo", isSidechain=True),
        _user(
            [{"type": "text", "text": "fix the bug"}], timestamp="2026-01-01T00:00:00Z"
        ),
    )
    assert events == [
        TurnStart(trace_id=SID, ts=1767225600.0, source="user"),
        Message(trace_id=SID, ts=1767225600.0, role="user", text="fix the bug"),
    ]


def test_failed_result_is_an_error_and_sessions_are_separate_traces() -> None:
    """A failed stream-json result gives error + trace_end(is_error); each session id is its own trace."""
    events, _, _ = _feed(
        {"type": "system", "subtype": "init", "session_id": "a"},
        {
            "type": "result",
            "subtype": "error_max_turns",
            "session_id": "a",
            "is_error": True,
            "errors": ["max turns"],
        },
        {"type": "system", "subtype": "init", "session_id": "b"},
        {"type": "user", "session_id": "b", "message": {"content": "hi"}},
        {"type": "result", "subtype": "success", "session_id": "b", "result": "ok"},
    )
    assert events == [
        TraceStart(trace_id="a"),
        TurnStart(trace_id="a", source="user"),
        AgentError(trace_id="a", message="max turns", code="error_max_turns"),
        TraceEnd(trace_id="a", is_error=True),
        TraceStart(trace_id="b"),
        TurnStart(trace_id="b", source="user"),
        Message(trace_id="b", role="user", text="hi"),  # the echoed -p prompt
        TraceEnd(trace_id="b", result="ok", is_error=False),
    ]


def test_type_clashes_matter_only_on_lines_that_are_read() -> None:
    """A wrong field type on a skipped line type is ignored; a non-object line is an error."""
    reader = ClaudeCodeReader(source="r.jsonl", default_trace="r")
    buf = b'{"type": "progress", "message": "x"}\n[1]\n'
    events, errors, _ = reader.feed(buf, 1)
    assert not events
    assert [(e.location.line, e.message) for e in errors] == [
        (
            2,
            "Expected `object`, got `array`; each line must be one Claude Code transcript or stream-json record",
        )
    ]


def test_held_usage_is_bounded_by_evicting_the_oldest_session() -> None:
    """Past 1024 live sessions the oldest one's held usage is emitted at once, none lost."""
    records = [
        _assistant(f"m{i}", {"type": "text", "text": ""}, sessionId=f"s{i}")
        for i in range(1030)
    ]
    events, _, rest = _feed(*records)
    assert [u.trace_id for u in _of(events, Usage)] == [f"s{i}" for i in range(6)]
    assert len(_of(rest, Usage)) == 1024


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_detects_every_fixture(name: str) -> None:
    """The first line of every fixture (summary, snapshot, queue, user, system) is Claude Code."""
    assert detect(_raw(name).split(b"\n", 1)[0]) == "claude-code"


@pytest.mark.parametrize(
    "record",
    [
        {"type": "tool_call", "name": "x", "trace_id": "t"},  # canonical
        {"type": "message", "role": "user", "content": "hi"},  # OpenResponses
        {"type": "session_meta", "timestamp": "t", "payload": {"id": "x"}},  # Codex
        {"type": "thread.started", "thread_id": "x"},  # codex exec --json
        {"type": "init", "session_id": "x", "model": "auto"},  # Gemini stream-json
        {"type": "user", "message": {"content": "hi"}},  # no session: not claimed
        {"type": "summary", "text": "x"},
        [{"message_type": "user_message"}],  # letta
    ],
)
def test_does_not_claim_other_records(record: object) -> None:
    """Records of other formats, or Claude-like ones without a session, are not claimed."""
    assert not FORMAT.sniff(record)


POLICY = """\
graders:
  - type: tool-calls
    config:
      required: ["^Write$"]
      disallowed: [{name: "^Bash$", command: "rm -rf"}]
  - type: token-budget
    config: {max: 200000}
"""


@pytest.mark.slow
def test_cli_grades_claude_code_logs_end_to_end(run_cli, tmp_path: Path) -> None:
    """`trajgrade grade` detects both shapes and grades each session by its id."""
    cfg = tmp_path / "policy.yaml"
    cfg.write_text(POLICY, encoding="utf-8")
    proc = run_cli(
        "grade", "-c", cfg, FIXTURES / STREAM, FIXTURES / "codemie_v2.0.64_small.jsonl"
    )
    assert proc.returncode == 1, proc.stderr
    finals = {
        (v["trace_id"][:8], v["grader"]): (v["outcome"], v["metadata"].get("value"))
        for v in map(json.loads, proc.stdout.splitlines())
        if v["final"]
    }
    assert finals == {
        ("837bc8f9", "tool-calls"): ("pass", None),
        ("837bc8f9", "token-budget"): ("pass", 600),
        ("4c2ddfdc", "tool-calls"): ("pass", None),
        ("4c2ddfdc", "token-budget"): ("fail", 252638),
    }


def test_a_result_without_earlier_usage_keeps_the_reported_cost() -> None:
    """Only the real init and result lines of a stream: the total cost is
    the cost of the result's tokens, and a dollar budget takes it."""
    lines = [
        line
        for line in _raw(STREAM).splitlines(keepends=True)
        if b'"type":"result"' in line or b'"subtype":"init"' in line
    ]
    usage = [e for e in _read(b"".join(lines)) if isinstance(e, Usage)]
    assert [u.cost_usd for u in usage] == [0.005]
    assert usage[0].output_tokens > 0


def test_lines_are_counted_only_for_a_location_and_stay_right_around_blank_lines() -> (
    None
):
    """The fast path numbers records among non-blank lines; blank lines before a
    bad record and before an event still give the right line numbers."""
    text = {"type": "text", "text": "hi"}
    good = json.dumps(_assistant("m1", text)).encode()
    bad = json.dumps(_line("user")).encode()  # no `message` object
    data = b"\n" + good + b"\n\n   \n" + bad + b"\n" + good + b"\n"
    dec = SourceDecoder("f.jsonl")
    batch = dec.feed(data)
    (err,) = batch.errors
    assert (err.location.line, err.location.field) == (5, "message")
    assert err.trace_id == SID
    assert [batch.line_of(i) for i in range(len(batch.events))][:1] == [2]
    assert batch.line_of(len(batch.events) - 1) == 6


def _line_cwds(data: bytes) -> dict[str, str | None]:
    """tool_use id -> the ``cwd`` of the transcript line that holds it."""
    out: dict[str, str | None] = {}
    for line in data.splitlines():
        rec = json.loads(line) if line.strip() else {}
        content = (rec.get("message") or {}).get("content")
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict) and block.get("type") == "tool_use":
                out[block["id"]] = rec.get("cwd")
    return out


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_each_call_carries_the_cwd_its_line_recorded(name: str) -> None:
    """A call's relative paths are the project's: the guard anchors them at
    ``ToolCall.cwd``, which is the recorded line's ``cwd`` (absolute only)."""
    data = _raw(name)
    recorded = _line_cwds(data)
    calls = _of(_read(data), ToolCall)
    assert calls
    for call in calls:
        cwd = recorded[call.call_id]
        assert call.cwd == (cwd if isinstance(cwd, str) and cwd[:1] == "/" else None)
    if "stream" not in name:  # transcripts record a cwd on every line
        assert all(c.cwd is not None and c.cwd.startswith("/") for c in calls)


def test_a_relative_word_is_judged_in_the_recorded_project() -> None:
    """codemie's ``rm hello.js`` ran in ``/tmp/private``: graded with the
    standard profile it deletes a project file, not a path that could lie
    under ``~/.ssh`` (the reading before calls kept their cwd)."""
    data = _raw("codemie_v2.0.64_small.jsonl")
    rm = next(c for c in _of(_read(data), ToolCall) if "rm hello.js" in str(c.args))
    assert rm.cwd == "/tmp/private"
    policy = FIXTURES.parents[2] / "src/trajgrade/examples/guard-standard.yaml"
    verdicts = grade_bytes(suite(policy.read_text()), data, source="s.jsonl").verdicts
    protect = [v for v in verdicts if v.grader == "protect" and v.final]
    assert [v.outcome.value for v in protect] == ["pass"], protect
