"""Harbor ATIF trajectories: the real corpus files, then edge cases."""

from __future__ import annotations

import itertools
import json
import random
import re
import subprocess
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from trajgrade.errors import InputError
from trajgrade.events import (
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
from trajgrade.formats.atif import FORMAT, AtifReader
from trajgrade.pipeline.decoder import SourceDecoder

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "atif"
_CALLS = re.compile(r"^(\d+) \(")


def _provenance() -> dict[str, int]:
    """fixture name -> tool calls, from the fixtures' SOURCES.md."""
    counts: dict[str, int] = {}
    for row in (FIXTURES / "SOURCES.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) == 10 and (m := _CALLS.match(cells[7])):
            counts[cells[0].strip("`")] = int(m[1])
    return counts


SOURCES = _provenance()
NAMES = sorted(SOURCES)
CLAUDE = "atif2otel_claude-code_v1.7_pass.json"
SUMMARIZATION = "harbor_terminus2_v1.5_context_summarization.json"
SUBAGENT = "harbor_terminus2_v1.5_context_summarization.summarization-1-summary.json"
INVALID = "harbor_terminus2_v1.5_invalid_json.json"


def _decode(
    data: bytes, chunks: list[int] | None = None, source: str = "trajectory.json"
) -> tuple[list[Event], list[InputError], str | None]:
    """Events, errors and detected format of ``data`` fed through a SourceDecoder."""
    decoder = SourceDecoder(source)
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
    events, errors, fmt = _decode(raw, source=name)
    assert errors == [] and fmt == "atif"
    return json.loads(raw), events


def _of(events: list[Event], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


@pytest.mark.parametrize("name", NAMES)
def test_tool_call_counts_match_the_corpus(name: str) -> None:
    """Every fixture yields as many tool calls as SOURCES.md says, in one trace named by session_id."""
    doc, events = _fixture(name)
    assert len(_of(events, ToolCall)) == SOURCES[name]
    assert {e.trace_id for e in events} == {doc["session_id"]}
    assert isinstance(events[0], TraceStart) and isinstance(events[-1], TraceEnd)
    assert events[0].metadata is not None
    assert events[0].metadata["schema_version"] == doc["schema_version"]


@pytest.mark.parametrize("name", NAMES)
def test_one_turn_per_agent_step(name: str) -> None:
    """Each agent step opens exactly one turn, tagged with its step_id."""
    doc, events = _fixture(name)
    agent_steps = [s["step_id"] for s in doc["steps"] if s["source"] == "agent"]
    assert [t.step for t in _of(events, TurnStart)] == agent_steps


@pytest.mark.parametrize("name", NAMES)
def test_every_call_is_answered_once_by_its_result(name: str) -> None:
    """Results pair to calls by id (v1.7) or by step (terminus-2), one result per call."""
    doc, events = _fixture(name)
    calls = {c.call_id: c for c in _of(events, ToolCall)}
    results = _of(events, ToolResult)
    assert sorted(r.call_id for r in results) == sorted(calls)
    for r in results:
        assert r.step == calls[r.call_id].step and r.name == calls[r.call_id].name
        assert r.is_error is None  # ATIF has no error field
    by_id = {
        res["source_call_id"]: res["content"]
        for s in doc["steps"]
        for res in (s.get("observation") or {}).get("results", [])
        if "source_call_id" in res
    }
    for r in results:
        if by_id:
            assert r.result == by_id[r.call_id]


@pytest.mark.parametrize("name", NAMES)
def test_usage_is_per_step_and_final_metrics_are_not_added(name: str) -> None:
    """Usage is each non-copied step's metrics; final_metrics never adds to it."""
    doc, events = _fixture(name)
    steps = [
        s for s in doc["steps"] if s.get("metrics") and not s.get("is_copied_context")
    ]
    usage = _of(events, Usage)
    assert [u.step for u in usage] == [s["step_id"] for s in steps]
    assert sum(u.input_tokens for u in usage) == sum(
        s["metrics"]["prompt_tokens"] for s in steps
    )
    assert sum(u.output_tokens for u in usage) == sum(
        s["metrics"]["completion_tokens"] for s in steps
    )
    assert sum(u.cache_read_tokens for u in usage) == sum(
        s["metrics"].get("cached_tokens", 0) for s in steps
    )


def test_final_metrics_include_subagents_so_steps_win() -> None:
    """The summarization run's totals count its subagents, which per-step usage leaves out."""
    doc, events = _fixture(SUMMARIZATION)
    counted = sum(u.input_tokens for u in _of(events, Usage))
    assert counted == 6502 and doc["final_metrics"]["total_prompt_tokens"] == 7802


def test_claude_code_v17_fields_are_kept() -> None:
    """Timestamps, tool names, object arguments, cost-free usage and cached tokens come through."""
    doc, events = _fixture(CLAUDE)
    first = _of(events, ToolCall)[0]
    assert (
        first.name == "Read" and first.call_id == "toolu_vrtx_01DMAvK6aCFYSU2EZmeSe8Ha"
    )
    assert first.args == doc["steps"][1]["tool_calls"][0]["arguments"]
    assert first.args_raw is None  # raw_arguments is an object here, not text
    assert first.ts == pytest.approx(1781613330.872)
    u = _of(events, Usage)[0]
    assert (u.input_tokens, u.output_tokens, u.cache_read_tokens) == (34547, 220, 24306)
    (start,) = _of(events, TraceStart)
    assert start.metadata == {
        "schema_version": "ATIF-v1.7",
        "agent": "claude-code",
        "agent_version": "2.1.178",
        "model": "claude-opus-4-6",
    }
    assert [m.role for m in _of(events, Message)][:2] == ["user", "assistant"]


def test_a_result_with_no_call_is_a_tool_message() -> None:
    """terminus-2's parse-error feedback (a result in a step without calls) is a tool message."""
    _, events = _fixture(INVALID)
    (feedback,) = [m for m in _of(events, Message) if m.role == "tool"]
    assert feedback.step == 2 and feedback.text.startswith(
        "Previous response had parsing errors"
    )
    assert [m.role for m in _of(events, Message) if m.step == 2] == [
        "reasoning",
        "assistant",
        "tool",
    ]


def test_copied_context_is_emitted_without_its_metrics() -> None:
    """A subagent file's copied steps give their calls but no usage."""
    _, events = _fixture(SUBAGENT)
    assert [c.step for c in _of(events, ToolCall)] == [2, 3]
    assert [u.step for u in _of(events, Usage)] == [5]


@pytest.mark.parametrize("name", NAMES)
def test_random_chunks_give_the_same_events(name: str) -> None:
    """The document fed in random-sized chunks decodes to the same events as whole."""
    raw = (FIXTURES / name).read_bytes()
    whole, _, _ = _decode(raw)
    rng = random.Random(name)
    for _ in range(5):
        cuts = sorted(rng.sample(range(1, len(raw)), rng.randint(1, 60)))
        chunked, errors, fmt = _decode(raw, cuts)
        assert errors == [] and fmt == "atif" and chunked == whole


def test_a_truncated_document_keeps_earlier_steps_and_reports_the_cut() -> None:
    """A document cut mid-step keeps the steps before the cut and reports it with the trace."""
    raw = (FIXTURES / CLAUDE).read_bytes()
    cut = raw.index(b'"step_id": 5')
    events, errors, fmt = _decode(raw[:cut])
    assert fmt == "atif"
    assert [t.step for t in _of(events, TurnStart)] == [2, 3, 4]
    assert not _of(events, TraceEnd)
    (err,) = errors
    assert "not valid JSON" in err.message
    assert err.trace_id == "a3b10bae-3ebd-4b8e-8779-3d21ce098521"


def _doc(steps: list[Any], **top: Any) -> bytes:
    return json.dumps({"schema_version": "ATIF-v1.6", **top, "steps": steps}).encode()


def _read(data: bytes) -> tuple[list[Event], list[InputError]]:
    reader = AtifReader(source="t.json", default_trace="t.json")
    events, errors, _ = reader.feed(data, 1)
    more, errs = reader.close()
    return events + more, errors + errs


def test_string_arguments_are_parsed_once_and_kept_raw() -> None:
    """JSON-string arguments become args, and their text stays in args_raw."""
    raw = '{"command": "ls"}'
    step = {
        "step_id": 1,
        "source": "agent",
        "tool_calls": [
            {"tool_call_id": "c", "function_name": "bash", "arguments": raw}
        ],
    }
    (call,) = _of(_read(_doc([step], session_id="s"))[0], ToolCall)
    assert call.args == {"command": "ls"} and call.args_raw == raw


def test_a_step_result_answers_every_open_call_of_its_step() -> None:
    """Without source_call_id, the step's one result answers each of its calls."""
    step = {
        "step_id": 2,
        "source": "agent",
        "tool_calls": [
            {"tool_call_id": "a", "function_name": "bash_command", "arguments": {}},
            {
                "tool_call_id": "b",
                "function_name": "mark_task_complete",
                "arguments": {},
            },
        ],
        "observation": {"results": [{"content": "screen"}]},
    }
    results = _of(_read(_doc([step], session_id="s"))[0], ToolResult)
    assert [(r.call_id, r.result) for r in results] == [
        ("a", "screen"),
        ("b", "screen"),
    ]


def test_final_metrics_count_when_no_step_has_metrics() -> None:
    """final_metrics becomes one usage before trace_end only when steps carry none."""
    totals = {
        "total_prompt_tokens": 10,
        "total_completion_tokens": 2,
        "total_cost_usd": 0.5,
    }
    events, errors = _read(
        _doc([{"step_id": 1, "source": "user"}], final_metrics=totals)
    )
    assert errors == []
    assert [type(e).__name__ for e in events[-2:]] == ["Usage", "TraceEnd"]
    usage = events[-2]
    assert isinstance(usage, Usage)
    assert (usage.input_tokens, usage.output_tokens, usage.cost_usd) == (10, 2, 0.5)
    bad = {"total_prompt_tokens": -1}
    _, errors = _read(_doc([], session_id="s", final_metrics=bad))
    assert [e.location.field for e in errors] == ["final_metrics.total_prompt_tokens"]


def test_a_session_id_after_the_steps_leaves_the_default_trace() -> None:
    """When session_id comes after the first step, the whole document uses the default trace."""
    events, _ = _read(
        json.dumps(
            {"steps": [{"step_id": 1, "source": "user"}], "session_id": "late"}
        ).encode()
    )
    assert {e.trace_id for e in events} == {"t.json"}


def test_bad_fields_are_located_input_errors() -> None:
    """A call without function_name and a non-integer token count are reported; the rest is read."""
    step = {
        "step_id": 1,
        "source": "agent",
        "tool_calls": [
            {"tool_call_id": "x"},
            {"tool_call_id": "y", "function_name": "ok"},
        ],
        "metrics": {"prompt_tokens": "many", "completion_tokens": 3},
    }
    events, errors = _read(_doc([step, [7]], session_id="s"))
    assert [c.name for c in _of(events, ToolCall)] == ["ok"]
    assert [(e.location.field, e.trace_id) for e in errors] == [
        ("tool_calls", "s"),
        ("metrics.prompt_tokens", "s"),
        ("steps", "s"),
    ]
    assert isinstance(events[-1], TraceEnd)


def test_detection_claims_atif_only() -> None:
    """ATIF is recognised from a prefix; Gemini sessions and other documents are not claimed."""
    raw = (FIXTURES / CLAUDE).read_bytes()
    assert detect_document(raw[:400], final=False) == ("atif", True)
    assert detect_document(b'{"schema_version": "ATIF-v1.7"', final=False) == (
        None,
        False,
    )
    gemini = b'{"sessionId": "s", "projectHash": "p", "messages": [{"id": "m"}]}'
    assert detect_document(gemini, final=True)[0] != "atif"
    assert not FORMAT.sniff({"steps": []})
    assert detect_document(b'{"steps": [{"role": "user"}]}', final=True) == (None, True)


def _big_document(steps: int) -> Iterator[bytes]:
    """A pretty-printed ATIF document of ``steps`` agent steps, in 64 KiB chunks."""
    step = {
        "step_id": 0,
        "source": "agent",
        "message": "x" * 200,
        "tool_calls": [
            {
                "tool_call_id": "c0",
                "function_name": "bash",
                "arguments": {"command": "ls"},
            }
        ],
        "observation": {"results": [{"source_call_id": "c0", "content": "y" * 200}]},
        "metrics": {"prompt_tokens": 10, "completion_tokens": 1},
    }
    template = (
        json.dumps(step, indent=2).replace('"c0"', '"c%d"').replace(": 0,", ": %d,")
    )
    buf = bytearray(
        b'{\n  "schema_version": "ATIF-v1.7",\n  "session_id": "big",\n  "steps": [\n'
    )
    for n in range(1, steps + 1):
        buf += (template % (n, n, n)).encode()
        buf += b",\n" if n < steps else b"\n"
        if len(buf) >= 1 << 16:
            yield bytes(buf)
            buf.clear()
    buf += b'  ],\n  "final_metrics": {"total_prompt_tokens": 1}\n}\n'
    yield bytes(buf)


@pytest.mark.slow
def test_memory_stays_flat_in_the_document_size() -> None:
    """Reading a ~40 MB, 50,000-step document keeps traced memory far below its size."""
    steps = 50_000
    decoder = SourceDecoder("big.json")
    size = calls = 0
    tracemalloc.start()
    try:
        for chunk in _big_document(steps):
            size += len(chunk)
            batch = decoder.feed(chunk)
            calls += sum(isinstance(e, ToolCall) for e in batch.events)
            assert batch.errors == []
        end = decoder.close()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    calls += sum(isinstance(e, ToolCall) for e in end.events)
    assert decoder.format == "atif" and calls == steps
    assert isinstance(end.events[-1], TraceEnd)
    assert size > 25_000_000 and peak < size / 20


POLICY = """\
graders:
  - type: tool-calls
    config:
      required: [{name: "^Edit$", min_count: 3}, "^Bash$"]
      disallowed: [{name: "^Bash$", command: "rm -rf"}]
  - type: token-budget
    config: {max: 400000}
"""


@pytest.mark.slow
def test_cli_grades_an_atif_trajectory_end_to_end(
    run_cli: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    """`trajgrade grade` auto-detects trajectory.json and grades it under its session id."""
    cfg = tmp_path / "policy.yaml"
    cfg.write_text(POLICY, encoding="utf-8")
    traj = tmp_path / "trajectory.json"
    traj.write_bytes((FIXTURES / CLAUDE).read_bytes())
    proc = run_cli("grade", "-c", cfg, traj)
    assert proc.returncode == 1, proc.stderr
    finals = {
        (v["trace_id"], v["grader"]): (v["outcome"], v["metadata"].get("value"))
        for v in map(json.loads, proc.stdout.splitlines())
        if v["final"]
    }
    sid = "a3b10bae-3ebd-4b8e-8779-3d21ce098521"
    assert finals == {
        (sid, "tool-calls"): ("pass", None),
        (sid, "token-budget"): ("fail", 485630 + 3304),
    }
