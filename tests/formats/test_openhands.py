"""OpenHands event streams: the real recorded runs, then edge cases."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from tests.formats._decode import decode, of, raw

from trajgrade.errors import InputError
from trajgrade.events import (
    AgentError,
    Event,
    Message,
    ToolCall,
    ToolResult,
    TraceEnd,
    TurnStart,
    Usage,
)
from trajgrade.formats import detect_document

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "openhands"
BASIC = "openhands_basic_2048.json.gz"
GUI = "openhands_basic_gui_mode.json.gz"
RENAME = "openhands_wrong_initial_state.json"
#: Observations answering a tool call, read by eye (the others answer chat).
RESULTS = {BASIC: 1, GUI: 4, RENAME: 3}


def _provenance() -> dict[str, int]:
    """fixture name -> tool calls, from its SOURCES.md rows."""
    counts: dict[str, int] = {}
    copied: dict[str, str] = {}
    for row in (FIXTURES / "SOURCES.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) == 10 and (m := re.match(r"(\d+) \(", cells[7])):
            counts[cells[0].strip("`")] = int(m[1])
        elif len(cells) == 2 and cells[0].startswith("`") and "/" not in cells[0]:
            copied[cells[0].strip("`")] = cells[1].strip("`")
    return {fixture: counts[origin] for fixture, origin in copied.items()}


SOURCES = _provenance()


def _raw(name: str) -> bytes:
    return raw(FIXTURES / name)


def _decode(
    data: bytes, chunks: list[int] | None = None
) -> tuple[list[Event], list[InputError]]:
    return decode(data, fmt="openhands", source="oh.json", chunks=chunks)


def _read(data: bytes, chunks: list[int] | None = None) -> list[Event]:
    events, errors = _decode(data, chunks)
    assert not errors, errors
    return events


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_tool_calls_match_sources_and_results_pair_by_cause(name: str) -> None:
    """Each fixture gives SOURCES.md's calls; each result names an earlier call's id."""
    events = _read(_raw(name))
    calls = of(events, ToolCall)
    assert len(calls) == SOURCES[name]
    results = of(events, ToolResult)
    assert len(results) == RESULTS[name]
    seen: dict[str, str] = {}
    for e in events:
        if isinstance(e, ToolCall):
            seen[e.call_id] = e.name
        elif isinstance(e, ToolResult):
            assert seen.pop(e.call_id) == e.name
            assert e.duration_ms is not None and e.duration_ms > 0


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_usage_is_counted_once_per_model_response(name: str) -> None:
    """Usage repeated on observations is counted once per model_response.id."""
    events = _read(_raw(name))
    responses = {
        e["tool_call_metadata"]["model_response"]["id"]: e["tool_call_metadata"][
            "model_response"
        ]["usage"]
        for e in json.loads(_raw(name))
        if e.get("tool_call_metadata")
    }
    usage = of(events, Usage)
    assert len(usage) == len(responses)
    assert sum(u.input_tokens for u in usage) == sum(
        r["prompt_tokens"] for r in responses.values()
    )
    assert sum(u.cache_read_tokens for u in usage) == sum(
        r["cache_read_input_tokens"] for r in responses.values()
    )


def test_calls_keep_the_models_arguments_and_timestamps_are_utc() -> None:
    """The model's JSON arguments are kept raw and parsed; zone-less times are UTC."""
    events = _read(_raw(RENAME))
    run = of(events, ToolCall)[1]
    assert run.name == "execute_bash"
    assert run.args_raw is not None and json.loads(run.args_raw) == run.args
    assert run.args["command"] == "mv /workspace/game_2048.py /workspace/2048.py"
    assert run.ts == 1738019816.951967  # 2025-01-27T23:16:56.951967 UTC


def test_exit_codes_decide_errors_and_running_commands_stay_unknown() -> None:
    """exit_code 0 is success; -1 (still running at the timeout) leaves is_error unset."""
    results = of(_read(_raw(GUI)), ToolResult)
    assert [r.is_error for r in results] == [False, None, None, None]


@pytest.mark.parametrize(("name", "turns"), [(BASIC, 1), (GUI, 1), (RENAME, 1)])
def test_turns_follow_user_messages_and_finish_ends_the_trace(
    name: str, turns: int
) -> None:
    """User message actions open turns; the document ends with trace_end."""
    events = _read(_raw(name))
    assert len(of(events, TurnStart)) == turns
    assert isinstance(events[-1], TraceEnd)
    assert of(events, TraceEnd) == [events[-1]]
    if name != GUI:  # the GUI session hands back to the user without finish
        assert of(events, ToolCall)[-1].name == "finish"
        assert events[-1].result


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_random_chunks_give_the_same_events(name: str) -> None:
    """Random chunk boundaries give the events of reading the document whole."""
    data = _raw(name)
    whole = _read(data)
    rng = random.Random(name)
    for _ in range(5):
        chunks: list[int] = []
        while sum(chunks) < len(data):
            chunks.append(rng.randint(1, 1 << rng.randint(1, 14)))
        assert _read(data, chunks) == whole


def test_truncated_stream_is_reported_and_earlier_events_kept() -> None:
    """A stream cut mid-event is reported with file and trace; earlier events stay."""
    data = _raw(RENAME)
    cut = data[: data.index(b'"id": 7')]
    events, errors = _decode(cut)
    assert len(errors) == 1
    assert (errors[0].location.file, errors[0].trace_id) == ("oh.json", "oh.json")
    assert len(of(events, ToolCall)) == 2
    assert len(of(events, ToolResult)) == 2


def test_error_states_and_bad_events() -> None:
    """Error observations and the error state are errors; bad events are located."""
    doc = [
        {"id": 0, "timestamp": "2025-01-01T00:00:00", "source": "user",
         "action": "message", "args": {"content": "go"}},
        {"id": 1, "timestamp": "2025-01-01T00:00:01", "source": "agent",
         "action": "run", "args": {"command": "false"},
         "tool_call_metadata": {"function_name": "execute_bash", "tool_call_id": "t1"}},
        {"id": 2, "timestamp": "2025-01-01T00:00:02", "source": "agent",
         "observation": "run", "cause": 1, "content": "",
         "extras": {"metadata": {"exit_code": 1}}},
        {"id": 3, "timestamp": "2025-01-01T00:00:03", "source": "agent",
         "observation": "error", "content": "LLM failed"},
        {"id": 4, "source": "environment"},
        {"id": 5, "timestamp": "2025-01-01T00:00:04", "source": "environment",
         "observation": "agent_state_changed", "extras": {"agent_state": "error"}},
    ]  # fmt: skip
    events, errors = _decode(json.dumps(doc, indent=2).encode())
    assert [(e.location.field, e.trace_id) for e in errors] == [
        ("[4].action", "oh.json")
    ]
    t0 = 1735689600.0
    assert events == [
        TurnStart(trace_id="oh.json", ts=t0, step=0, source="user"),
        Message(trace_id="oh.json", ts=t0, role="user", text="go"),
        ToolCall(trace_id="oh.json", ts=t0 + 1, name="execute_bash", call_id="t1",
                 args={"command": "false"}),
        ToolResult(trace_id="oh.json", ts=t0 + 2, call_id="t1", name="execute_bash",
                   result="", is_error=True, duration_ms=1000.0),
        AgentError(trace_id="oh.json", ts=t0 + 3, message="LLM failed"),
        AgentError(trace_id="oh.json", ts=t0 + 4,
                   message="the agent entered the error state"),
        TraceEnd(trace_id="oh.json", is_error=True),
    ]  # fmt: skip


def test_ids_and_causes_that_name_no_event_are_located_errors() -> None:
    """An action ``id`` or an observation ``cause`` that is not an event id
    (an object, an array: they raised TypeError, unhashable, before) is an
    error at that event, which is skipped; the other events pair as before,
    and a call without an id is not answered by an observation without a
    cause."""
    t0 = "2025-01-01T00:00:0"
    meta = {"function_name": "execute_bash"}
    doc = [
        {"id": 1, "timestamp": t0 + "1", "source": "agent", "action": "run",
         "args": {"command": "ls"}, "tool_call_metadata": {**meta, "tool_call_id": "t1"}},
        {"id": [2], "timestamp": t0 + "2", "source": "agent", "action": "run",
         "args": {"command": "pwd"}, "tool_call_metadata": {**meta, "tool_call_id": "t2"}},
        {"id": 3, "timestamp": t0 + "3", "source": "agent", "observation": "run",
         "cause": {"id": 1}, "content": "lost", "extras": {}},
        {"id": 4, "timestamp": t0 + "4", "source": "agent", "observation": "run",
         "cause": 1, "content": "a b", "extras": {"metadata": {"exit_code": 0}}},
        {"timestamp": t0 + "5", "source": "agent", "action": "run",
         "args": {"command": "id"}, "tool_call_metadata": {**meta, "tool_call_id": "t3"}},
        {"id": 6, "timestamp": t0 + "6", "source": "agent", "observation": "run",
         "content": "not its result", "extras": {}},
    ]  # fmt: skip
    events, errors = _decode(json.dumps(doc).encode())
    assert [(e.location.field, e.trace_id) for e in errors] == [
        ("[1].id", "oh.json"),
        ("[2].cause", "oh.json"),
    ]
    assert all(e.location.line == 1 for e in errors)
    assert "must be an event id" in errors[0].message
    assert [(c.call_id, c.args) for c in of(events, ToolCall)] == [
        ("t1", {"command": "ls"}),
        ("t3", {"command": "id"}),
    ]
    assert [(r.call_id, r.result, r.is_error) for r in of(events, ToolResult)] == [
        ("t1", "a b", False)
    ]
    assert isinstance(events[-1], TraceEnd)


@pytest.mark.parametrize(
    "doc",
    [
        [{"role": "user", "content": "x"}],  # message list
        [{"type": "message", "role": "user", "content": "x"}],  # OpenResponses
        [{"task_id": 1, "traj": []}],  # tau-bench
        {"events": [{"id": 1, "timestamp": "t", "source": "user", "action": "x"}]},
    ],
)
def test_does_not_claim_other_documents(doc: object) -> None:
    """Documents of other formats are not taken for an OpenHands stream."""
    data = json.dumps(doc, indent=2).encode()
    assert detect_document(data, final=True)[0] != "openhands"


POLICY = """\
graders:
  - type: tool-calls
    config:
      required: ["^str_replace_editor$"]
      disallowed: [{name: "^execute_bash$", command: "http\\\\.server"}]
  - type: token-budget
    config: {max: 15000}
"""


@pytest.mark.slow
def test_cli_grades_openhands_streams_end_to_end(run_cli, tmp_path: Path) -> None:
    """`trajgrade grade` detects OpenHands streams and grades each as one run."""
    cfg = tmp_path / "policy.yaml"
    cfg.write_text(POLICY, encoding="utf-8")
    gui = tmp_path / "gui.json"
    gui.write_bytes(_raw(GUI))
    proc = run_cli("grade", "-c", cfg, gui, FIXTURES / RENAME)
    assert proc.returncode == 1, proc.stderr
    finals = {
        (Path(v["trace_id"]).name, v["grader"]): v["outcome"]
        for v in map(json.loads, proc.stdout.splitlines())
        if v["final"]
    }
    assert finals == {
        ("gui.json", "tool-calls"): "fail",
        ("gui.json", "token-budget"): "fail",
        (RENAME, "tool-calls"): "pass",
        (RENAME, "token-budget"): "fail",
    }
