"""Properties every adapter keeps, on a real recorded file of each format.

* **Chunking changes nothing**: the file fed in random pieces (as a growing
  file or a pipe delivers it) gives exactly the events of reading it whole.
* **Truncation gives a prefix**: the events emitted while the first ``k``
  bytes are fed (before end of input is known) are a prefix of the complete
  file's events, for any ``k``; ending the input there never crashes.

Formats without a recorded file (vally, openresponses, openai-chat lines,
trajgrade's own) get small files written here from their documented shapes.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.formats._decode import raw

from trajgrade.formats import BUILTIN
from trajgrade.pipeline.decoder import SourceDecoder

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

#: One real file per format (small enough for many hypothesis examples).
RECORDED = {
    "agentv": "agentv/agentv_imported-codex-transcript.jsonl",
    "atif": "atif/atif2otel_claude-code_v1.7_pass.json",
    "claude-code": "claude-code/agentcmd_v2.0.14_trailing_unanswered_calls.jsonl",
    "codex": "codex/live_v0.169.0_blocking_json-deny_events.jsonl",
    "gemini-cli": "gemini-cli/agentcmd_gemini_3_calls.json",
    "gemini-cli-jsonl": "gemini-cli-live/base.transcript.jsonl",
    "gemini-stream-json": "gemini-cli-live/base.stream.jsonl",
    "letta": "letta/letta-evals_simple_tool_grader_oct2025.results.jsonl",
    "mini-swe-agent": "mini-swe-agent/mini-swe-agent_github_issue_replay.traj.json",
    "openai-chat-json": "openai-chat/tau-bench_gpt-4o_airline_subset.json.gz",
    "openhands": "openhands/openhands_wrong_initial_state.json",
    "otel": "otel/agent_run.jsonl",
    "swe-agent": "swe-agent/sweagent_v1_function_calling_test-repo.traj",
}

#: Formats with no recorded file: a few records in their documented shapes.
WRITTEN = {
    "vally": b"\n".join(
        [
            b'{"type":"turn_start","data":{}}',
            b'{"type":"tool_call","timestamp":"2025-01-15T10:30:00Z","data":{"toolName":"bash","toolCallId":"c1","arguments":{"command":"ls"}}}',
            b'{"type":"tool_result","timestamp":"2025-01-15T10:30:01Z","data":{"toolCallId":"c1","result":"x","success":false}}',
            b'{"type":"usage","input_tokens":5,"output_tokens":1}',
        ]
    )
    + b"\n",
    "openresponses": b"\n".join(
        [
            b'[{"type":"message","role":"user","content":"hi"},{"type":"function_call","call_id":"c1","name":"search","arguments":"{\\"q\\": \\"x\\"}"}]',
            b'[{"type":"function_call_output","call_id":"c1","output":"found"}]',
        ]
    )
    + b"\n",
    "openai-chat": b'{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"t1","type":"function","function":{"name":"lookup","arguments":"{\\"id\\": 1}"}}]},{"role":"tool","tool_call_id":"t1","content":"ok"}]}\n',
    "trajgrade": b"\n".join(
        [
            b'{"trace_id":"a","type":"turn_start"}',
            b'{"trace_id":"a","type":"tool_call","name":"view","call_id":"1"}',
            b'{"trace_id":"b","type":"tool_call","name":"bash","call_id":"2","args":{"command":"ls"}}',
            b'{"trace_id":"a","type":"tool_result","call_id":"1","result":"x"}',
            b'{"trace_id":"a","type":"trace_end"}',
        ]
    )
    + b"\n",
}


def _data(fmt: str) -> bytes:
    return WRITTEN[fmt] if fmt in WRITTEN else raw(FIXTURES / RECORDED[fmt])


def _events(data: bytes, cuts: list[int], *, close: bool = True) -> list[bytes]:
    """Events (encoded, to compare by value) of ``data`` fed at ``cuts``."""
    dec = SourceDecoder("input")
    out = []
    pos = 0
    for cut in [*sorted(cuts), len(data)]:
        out += dec.feed(data[pos:cut]).events
        pos = cut
    if close:
        out += dec.close().events
    return [msgspec.json.encode(e) for e in out]


def test_every_format_has_a_file_here() -> None:
    assert set(RECORDED) | set(WRITTEN) == set(BUILTIN)


@pytest.mark.parametrize("fmt", sorted(BUILTIN))
def test_the_file_is_read_as_its_format(fmt: str) -> None:
    dec = SourceDecoder("input")
    batch = dec.feed(_data(fmt))
    end = dec.close()
    assert dec.format == fmt
    assert batch.events + end.events, (
        "no events: the file does not exercise the adapter"
    )


@pytest.mark.parametrize("fmt", sorted(BUILTIN))
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(data=st.data())
def test_chunking_changes_nothing(fmt: str, data: st.DataObject) -> None:
    doc = _data(fmt)
    whole = _events(doc, [])
    cuts = data.draw(st.lists(st.integers(0, len(doc)), max_size=12), label="cuts")
    assert _events(doc, cuts) == whole


@pytest.mark.parametrize("fmt", sorted(BUILTIN))
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(data=st.data())
def test_truncation_gives_a_prefix_and_never_crashes(
    fmt: str, data: st.DataObject
) -> None:
    doc = _data(fmt)
    whole = _events(doc, [])
    k = data.draw(st.integers(0, len(doc)), label="truncated at byte")
    cuts = data.draw(st.lists(st.integers(0, k), max_size=6), label="cuts")
    before_end = _events(doc[:k], cuts, close=False)
    assert before_end == whole[: len(before_end)]
    _events(doc[:k], cuts)  # ending the input there: errors at most, no crash
