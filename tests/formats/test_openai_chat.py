"""OpenAI chat-completions conversations: the real tau-bench runs, as a document and as JSONL."""

from __future__ import annotations

import gzip
import json
import random
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
)
from trajgrade.formats import detect, detect_document
from trajgrade.formats.openai_chat import DOCUMENT, FORMAT, ChatLinesReader
from trajgrade.pipeline.decoder import SourceDecoder

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "openai-chat"
TAU = "tau-bench_gpt-4o_airline_subset.json.gz"
#: From SOURCES.md: 38 calls over 4 runs, each answered by one tool message.
CALLS = 38
RUNS = {"13/0": 14, "13/1": 5, "26/1": 10, "13/2": 9}


def _tau() -> bytes:
    return gzip.decompress((FIXTURES / TAU).read_bytes())


def _as_jsonl() -> bytes:
    """The same runs, one per line."""
    return b"".join(json.dumps(r).encode() + b"\n" for r in json.loads(_tau()))


def _decode(
    data: bytes, chunks: list[int] | None = None, fmt: str = "auto"
) -> tuple[SourceDecoder, list[Event], list[InputError]]:
    """Decode through the pipeline (detection included), whole or in chunks."""
    dec = SourceDecoder("f.json", fmt=fmt)
    events: list[Event] = []
    errors: list[InputError] = []
    pos = 0
    for size in [*(chunks or []), len(data)]:
        batch = dec.feed(data[pos : pos + size])
        events += batch.events
        errors += batch.errors
        pos += size
    end = dec.close()
    return dec, events + end.events, errors + end.errors


def _read(data: bytes, chunks: list[int] | None = None) -> list[Event]:
    _, events, errors = _decode(data, chunks)
    assert not errors, errors
    return events


def _of(events: list[Event], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def test_tau_bench_document_is_detected_and_counts_match_sources() -> None:
    """The tau-bench file is openai-chat-json, with the 38 calls of SOURCES.md, per run."""
    dec, events, errors = _decode(_tau())
    assert dec.format == "openai-chat-json"
    assert not errors
    calls = _of(events, ToolCall)
    assert len(calls) == CALLS
    assert {t: sum(c.trace_id == t for c in calls) for t in RUNS} == RUNS


def test_jsonl_runs_give_the_same_events_as_the_document() -> None:
    """The runs re-written one per line are openai-chat and decode to the same events."""
    dec, events, errors = _decode(_as_jsonl())
    assert dec.format == "openai-chat"
    assert not errors
    assert events == _read(_tau())


def test_every_call_is_answered_by_id() -> None:
    """Each tool result pairs with an earlier call of the same trace and name."""
    events = _read(_tau())
    open_calls: dict[tuple[str, str], str] = {}
    for e in events:
        if isinstance(e, ToolCall):
            assert e.call_id is not None and e.call_id.startswith("call_")
            open_calls[(e.trace_id, e.call_id)] = e.name
        elif isinstance(e, ToolResult):
            assert e.call_id is not None
            assert open_calls.pop((e.trace_id, e.call_id)) == e.name
            assert e.is_error is None
    assert not open_calls


def test_arguments_are_parsed_once_and_kept_raw() -> None:
    """JSON-string arguments become args, and the string is kept in args_raw."""
    first = _of(_read(_tau()), ToolCall)[0]
    assert first.name == "get_reservation_details"
    assert first.args_raw == '{"reservation_id":"XEWRD9"}'
    assert first.args == {"reservation_id": "XEWRD9"}


def test_turns_are_user_messages_and_runs_are_whole_traces() -> None:
    """Each user message opens a turn; every run starts with its metadata and ends."""
    events = _read(_tau())
    runs = json.loads(_tau())
    for run in runs:
        tid = f"{run['task_id']}/{run['trial']}"
        mine = [e for e in events if e.trace_id == tid]
        users = sum(m["role"] == "user" for m in run["traj"])
        turns = _of(mine, TurnStart)
        assert [t.step for t in turns] == list(range(users))
        assert isinstance(mine[0], TraceStart) and mine[0].metadata is not None
        assert mine[0].metadata["reward"] == run["reward"]
        assert mine[-1] == TraceEnd(trace_id=tid)
    assert [e.trace_id for e in _of(events, TraceEnd)] == list(RUNS)


def test_random_chunks_give_the_same_events() -> None:
    """Random chunk boundaries give the events of reading the document or JSONL whole."""
    rng = random.Random(5)
    for data in (_tau(), _as_jsonl()):
        whole = _read(data)
        for _ in range(5):
            chunks: list[int] = []
            while sum(chunks) < len(data):
                chunks.append(rng.randint(1, 1 << rng.randint(1, 14)))
            assert _read(data, chunks) == whole


def test_message_list_records_and_ids() -> None:
    """Lines may be bare message arrays or {messages}; ids name traces, else position."""
    lines = [
        [{"role": "user", "content": "hi"}],
        {"id": "conv-7", "messages": [{"role": "user", "content": "yo"}]},
        {"messages": [{"role": "system", "content": "be brief"}]},
    ]
    buf = b"".join(json.dumps(r).encode() + b"\n" for r in lines)
    assert detect(buf.split(b"\n", 1)[0]) == "openai-chat"
    events, errors, _ = ChatLinesReader(source="c.jsonl", default_trace="c").feed(
        buf, 1
    )
    assert not errors
    assert [e.trace_id for e in _of(events, TraceEnd)] == ["c", "conv-7", "c#3"]
    assert _of(events, Message)[-1] == Message(
        trace_id="c#3", role="system", text="be brief"
    )


def test_unanswered_calls_content_parts_and_crashed_runs() -> None:
    """Calls without results stay; text parts are joined; info.error ends the run in error."""
    record = {
        "id": "r",
        "info": {"error": "boom"},
        "messages": [
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "a"},
                    {"type": "text", "text": "b"},
                ],
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "f", "arguments": "not json"},
                    }
                ],
            }
        ],
    }
    events, errors, _ = ChatLinesReader(source="c.jsonl", default_trace="c").feed(
        json.dumps(record).encode(), 1
    )
    assert not errors
    assert events == [
        TraceStart(trace_id="r", metadata={"id": "r", "info": {"error": "boom"}}),
        Message(trace_id="r", role="assistant", text="a\nb"),
        ToolCall(trace_id="r", name="f", call_id="c1", args_raw="not json"),
        AgentError(trace_id="r", message="boom"),
        TraceEnd(trace_id="r", is_error=True),
    ]


def test_bad_lines_and_messages_are_located_and_the_rest_is_kept() -> None:
    """An undecodable line and a bad message are reported with line, field and trace."""
    good = {"id": "a", "messages": [{"role": "user", "content": "q"}]}
    bad = {"messages": [{"role": "user", "content": "q"}, {"content": "no role"}]}
    buf = json.dumps(good).encode() + b"\n{broken\n" + json.dumps(bad).encode() + b"\n"
    dec, events, errors = _decode(buf)
    assert dec.format == "openai-chat"
    assert [(e.location.line, e.location.field, e.trace_id) for e in errors] == [
        (2, None, "f.json#2"),
        (3, "messages[1].role", "f.json#3"),
    ]
    assert [e.trace_id for e in _of(events, TraceEnd)] == ["a", "f.json#3"]


def test_truncated_document_is_reported_and_earlier_runs_kept() -> None:
    """A document cut mid-run reports the break; the runs before it were read."""
    data = _tau()
    cut = data[: data.index(b'"task_id": 26')]
    dec, events, errors = _decode(cut)
    assert dec.format == "openai-chat-json"
    assert len(errors) == 1 and "not valid JSON" in str(errors[0])
    assert errors[0].location.file == "f.json"
    assert [e.trace_id for e in _of(events, TraceEnd)] == ["13/0", "13/1"]


def test_messages_document_streams_one_conversation() -> None:
    """A pretty-printed {id, messages} document is one trace named by its id."""
    doc = {
        "id": "d1",
        "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "x",
                        "type": "function",
                        "function": {"name": "f", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "x", "content": "r"},
        ],
    }
    dec, events, errors = _decode(json.dumps(doc, indent=2).encode(), [7, 30])
    assert dec.format == "openai-chat-json" and not errors
    assert events == [
        Message(trace_id="d1", role="system", text="s"),
        TurnStart(trace_id="d1", step=0, source="user"),
        Message(trace_id="d1", role="user", text="u"),
        ToolCall(trace_id="d1", name="f", call_id="x", args={}, args_raw="{}"),
        ToolResult(trace_id="d1", call_id="x", result="r"),
        TraceEnd(trace_id="d1"),
    ]


def test_bare_message_array_document_when_named() -> None:
    """--format openai-chat-json reads a pretty-printed bare message array as one trace."""
    doc = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]
    _, events, errors = _decode(
        json.dumps(doc, indent=1).encode(), fmt="openai-chat-json"
    )
    assert not errors
    assert [type(e) for e in events] == [TurnStart, Message, Message, TraceEnd]


@pytest.mark.parametrize(
    "record",
    [
        {"type": "message", "role": "user", "content": "hi"},  # OpenResponses
        [{"type": "message", "role": "user", "content": "hi"}],  # OpenResponses
        [{"message_type": "user_message"}],  # letta
        [[{"message_type": "user_message"}]],  # letta
        {"output": [{"role": "assistant", "content": "x"}]},  # agentv
        {"events": []},  # vally
        {"type": "tool_call", "name": "x"},  # canonical
        [
            {"role": "system", "content": "s"},
            {"role": "assistant", "content": "x\n```mswea_bash_command\nls\n```"},
        ],  # mini-swe-agent
        [{"id": 1, "source": "user", "action": "message", "args": {}}],  # OpenHands
    ],
)
def test_does_not_claim_other_records(record: object) -> None:
    """Records of other formats are not claimed by the line sniffer."""
    assert not FORMAT.sniff(record)
    assert not DOCUMENT.sniff(record)


@pytest.mark.parametrize(
    "doc",
    [
        {"sessionId": "s", "messages": [{"id": "m", "type": "user", "content": "x"}]},
        {"schema_version": "ATIF-v1.5", "steps": [{"step_id": 1}]},
        [{"id": 0, "timestamp": "t", "source": "user", "action": "message"}],
        [{"role": "user", "content": "mini-swe-agent has this shape"}],
        {"trajectory": [{"action": "ls"}], "history": [{"role": "user"}]},
    ],
)
def test_document_sniffer_leaves_other_documents(doc: object) -> None:
    """Gemini CLI, ATIF, OpenHands, bare message arrays and SWE-agent are not claimed."""
    data = json.dumps(doc, indent=2).encode()
    assert detect_document(data, final=True)[0] != "openai-chat-json"


POLICY = """\
graders:
  - type: tool-call-count
    config: {max: 10}
  - type: tool-calls
    config:
      required: ["^get_reservation_details$"]
"""


@pytest.mark.slow
def test_cli_grades_tau_bench_end_to_end(run_cli, tmp_path: Path) -> None:
    """`trajgrade grade` detects the tau-bench document and grades each run."""
    cfg = tmp_path / "policy.yaml"
    cfg.write_text(POLICY, encoding="utf-8")
    doc = tmp_path / "tau.json"
    doc.write_bytes(_tau())
    proc = run_cli("grade", "-c", cfg, doc)
    assert proc.returncode == 1, proc.stderr
    finals = {
        (v["trace_id"], v["grader"]): v["outcome"]
        for v in map(json.loads, proc.stdout.splitlines())
        if v["final"]
    }
    assert finals == {
        ("13/0", "tool-call-count"): "fail",
        ("13/1", "tool-call-count"): "pass",
        ("26/1", "tool-call-count"): "pass",
        ("13/2", "tool-call-count"): "pass",
        ("13/0", "tool-calls"): "pass",
        ("13/1", "tool-calls"): "pass",
        ("26/1", "tool-calls"): "pass",
        ("13/2", "tool-calls"): "pass",
    }
