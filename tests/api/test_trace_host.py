"""TraceHost: one trace's grading state fed, snapshotted and restored by a host.

Real recorded sessions (the Claude Code and Codex corpora, converted to
canonical events by ``trajgrade convert`` in a subprocess) go through the host
one record at a time with a snapshot/restore after every record; the verdicts
and guard decisions must be byte-identical to ``trajgrade grade``'s
(``grade_bytes``) on the same file, trace by trace.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import msgspec
import pytest
from tests._support import converted

from trajgrade.api import HostOutput, TraceHost
from trajgrade.errors import ConfigError, InputError
from trajgrade.pipeline.whole import grade_bytes

ROOT = Path(__file__).resolve().parents[2]
SIX = ROOT / "benchmarks" / "six.yaml"
GUARD = ROOT / "tests" / "fixtures" / "guard-live" / "regex-guard.yaml"
BENCH_EVENTS = ROOT / "tests" / "fixtures" / "bench" / "small_events.jsonl.gz"
CORPUS = ROOT / "tests" / "fixtures"
_ENC = msgspec.json.Encoder()


def _hosted(
    host: TraceHost, data: bytes, *, restore_every: int = 1
) -> tuple[dict[str, list[bytes]], dict[str, list[bytes]], int]:
    """Per trace: verdict and decision JSON, fed record by record (a snapshot
    and restore every ``restore_every`` records), then finished; and the
    largest snapshot of an open trace."""
    states: dict[str, bytes] = {}
    verdicts: dict[str, list[bytes]] = {}
    decisions: dict[str, list[bytes]] = {}
    largest = 0

    def keep(outs: list[HostOutput]) -> None:
        for o in outs:
            into = verdicts if o.kind == "verdict" else decisions
            into.setdefault(o.trace_id, []).append(o.to_json())

    live = {}
    for n, line in enumerate(data.splitlines(keepends=True)):
        tid = host.trace_id_of(line)
        assert tid is not None
        state = live.get(tid) or (
            host.restore(states[tid]) if tid in states else host.open(tid)
        )
        keep(host.feed(state, line))
        if n % restore_every == 0:
            states[tid] = host.snapshot(state)
            if not state.closed:
                largest = max(largest, len(states[tid]))
            live.pop(tid, None)
        else:
            live[tid] = state
    for tid in states.keys() | live.keys():
        keep(host.finish(live.get(tid) or host.restore(states[tid])))
    return verdicts, decisions, largest


def _graded(
    host: TraceHost, data: bytes
) -> tuple[dict[str, list[bytes]], dict[str, list[bytes]]]:
    result = grade_bytes(host.suite, data)
    verdicts: dict[str, list[bytes]] = {}
    decisions: dict[str, list[bytes]] = {}
    for v in result.verdicts:
        verdicts.setdefault(v.trace_id, []).append(_ENC.encode(v))
    for d in result.decisions:
        decisions.setdefault(d.trace_id, []).append(_ENC.encode(d))
    return verdicts, decisions


@pytest.fixture(scope="module")
def corpus() -> bytes:
    logs = sorted((CORPUS / "claude-code").glob("*.jsonl"))
    logs += sorted((CORPUS / "codex").glob("*.jsonl"))
    assert len(logs) >= 6
    return converted(logs)


@pytest.mark.parametrize("policy", [SIX, GUARD], ids=["six", "guard"])
@pytest.mark.parametrize("every", [1, 7])
def test_recorded_sessions_grade_as_trajgrade_grade(
    corpus: bytes, policy: Path, every: int
) -> None:
    """Same verdicts and decisions, same JSON and ids, with restores between records."""
    host = TraceHost.from_policy(policy, allow_code=True)
    want_verdicts, want_decisions = _graded(host, corpus)
    verdicts, decisions, _ = _hosted(host, corpus, restore_every=every)
    assert len(want_verdicts) >= 6
    assert verdicts == want_verdicts
    assert decisions == want_decisions
    if policy == GUARD:
        assert sum(map(len, want_decisions.values())) > 0


def test_snapshot_of_an_open_trace_stays_under_a_kilobyte() -> None:
    """The six benchmark checks: every open trace's snapshot ≤ 1 KB after every event."""
    host = TraceHost.from_policy(SIX, allow_code=True)
    data = gzip.decompress(BENCH_EVENTS.read_bytes())
    verdicts, _, largest = _hosted(host, data)
    assert verdicts == _graded(host, data)[0]
    assert 0 < largest <= 1024


def test_snapshot_refusals() -> None:
    """Damaged bytes, another policy's snapshot and another version are refused."""
    host = TraceHost.from_policy(SIX, allow_code=True)
    state = host.open("t1")
    host.feed(state, {"type": "tool_call", "name": "view", "trace_id": "t1"})
    good = host.snapshot(state)
    assert host.restore(good).records == 1
    damaged = bytearray(good)
    damaged[-1] ^= 0x01
    with pytest.raises(InputError, match="checksum"):
        host.restore(bytes(damaged))
    with pytest.raises(InputError, match="checksum"):
        host.restore(b"")
    other = TraceHost.from_policy(
        "graders:\n  - type: tool-calls\n    config: {required: [x]}\n"
    )
    with pytest.raises(ConfigError, match="another policy"):
        other.restore(good)
    # A snapshot of a later layout: its version field is refused by name.
    import zlib

    body = msgspec.msgpack.encode([99, "x", []])
    with pytest.raises(InputError, match="version 99"):
        host.restore(zlib.crc32(body).to_bytes(4, "big") + body)
    with pytest.raises(TypeError):
        host.restore("text")  # type: ignore[arg-type]


def test_a_finished_trace_drops_its_late_records() -> None:
    """After finish the state is closed and later records decide nothing."""
    host = TraceHost.from_policy(SIX, allow_code=True)
    state = host.open("t1")
    assert host.feed(
        state, b'{"type":"tool_call","name":"web_fetch","trace_id":"t1"}\n'
    )
    finals = host.finish(state, reason="idle")
    assert {o.payload["grader"] for o in finals} >= {"in_order", "exact"}
    assert state.closed
    again = host.restore(host.snapshot(state))
    assert again.closed
    assert (
        host.feed(again, {"type": "tool_call", "name": "edit", "trace_id": "t1"}) == []
    )
    assert host.finish(again) == []
    with pytest.raises(ValueError, match="reason"):
        host.finish(host.open("t2"), reason="later")


def test_records_keyed_to_another_trace_raise() -> None:
    host = TraceHost.from_policy(SIX, allow_code=True)
    with pytest.raises(ValueError, match="trace_id_of"):
        host.feed(host.open("a"), {"type": "tool_call", "name": "x", "trace_id": "b"})


def test_an_unreadable_record_taints_its_trace() -> None:
    """As in ``trajgrade grade``: the trace's graders end in error."""
    host = TraceHost.from_policy(SIX, allow_code=True)
    state = host.open("t1")
    host.feed(state, {"type": "tool_call", "name": "grep", "trace_id": "t1"})
    assert host.feed(state, b"{not json\n") == []
    host.feed(state, {"type": "tool_call", "name": "view", "trace_id": "t1"})
    state = host.restore(host.snapshot(state))
    finals = host.finish(state)
    # (A sealed outcome stands, naming the loss; every other one is an error.)
    lost = [o.payload.get("metadata", {}).get("lost_events", "") for o in finals]
    errors = [o.payload["evidence"] for o in finals if o.payload["outcome"] == "error"]
    assert errors and all("t1:2" in e for e in errors)
    assert all(
        o.payload["outcome"] == "error" or "t1:2" in w
        for o, w in zip(finals, lost, strict=True)
    )


def test_trace_id_of() -> None:
    host = TraceHost.from_policy(SIX, allow_code=True)
    assert host.trace_id_of(b'{"type":"message","trace_id":"abc"}') == "abc"
    assert host.trace_id_of({"trace_id": "abc"}) == "abc"
    assert host.trace_id_of({"trace_id": 3}) is None
    assert host.trace_id_of(b'{"type":"message"}') is None
    assert host.trace_id_of(b'{"trace_id": "cut", "text": "unterminated') == "cut"
    with pytest.raises(TypeError):
        host.trace_id_of(3)  # type: ignore[arg-type]


def test_outputs_are_the_json_grade_prints() -> None:
    """A verdict output's id is the verdict's; a decision's id is stable."""
    host = TraceHost.from_policy(GUARD)
    call = {
        "type": "tool_call",
        "name": "Bash",
        "call_id": "c1",
        "args": {"command": "sudo ls"},
        "trace_id": "t",
    }

    def run() -> list[HostOutput]:
        return host.feed(host.open("t"), call)

    first, second = run(), run()
    assert first == second
    (decision,) = [o for o in first if o.kind == "decision"]
    assert (
        decision.payload["type"] == "decision" and decision.payload["action"] == "deny"
    )
    assert msgspec.json.decode(decision.to_json()) == decision.payload
    other = host.feed(host.open("t"), {**call, "call_id": "c2"})
    assert [o.id for o in other if o.kind == "decision"] != [decision.id]


def test_policy_text_and_document_formats() -> None:
    text = '{"graders": [{"type": "tool-calls", "config": {"required": ["x"]}}]}'
    host = TraceHost.from_policy(text)
    state = host.open("t")
    host.feed(
        state, {"type": "tool_call", "name": "x", "call_id": "1", "trace_id": "t"}
    )
    result = {"type": "tool_result", "call_id": "1", "result": "ok", "trace_id": "t"}
    (verdict,) = host.feed(state, result)  # (decided: the trace is done)
    assert verdict.payload["outcome"] == "pass" and verdict.payload["early"]
    # (Kept open while its calls are still judged; its end adds no verdict.)
    assert host.finish(state) == [] and state.closed
    with pytest.raises(ConfigError, match="whole JSON document"):
        TraceHost.from_policy(text, format="atif")
    with pytest.raises(ConfigError, match="unknown input format"):
        TraceHost.from_policy(text, format="nope")
    with pytest.raises(TypeError):
        host.open("")
