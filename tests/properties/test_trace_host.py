"""A hosted trace grades as ``trajgrade grade``: the interleaved events of a
stream, each fed to its trace's :class:`TraceHost` state (as bytes or as a
decoded mapping), the state snapshotted and restored after any of them (a
stream processor's checkpoint, restore, or a move to another worker), give
per trace exactly the verdicts and guard decisions ``grade_bytes`` gives on the
same JSONL; the snapshot of an open trace stays bounded."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import encode_jsonl, streams, suites

from trajgrade.api.trace_host import TraceHost, TraceState
from trajgrade.pipeline.whole import grade_bytes

if TYPE_CHECKING:
    from strategies import Stream, SuiteCase

_ENC = msgspec.json.Encoder()
#: Generous bound for the generated suites (up to six graders, 20 events a trace).
_BOUND = 4096


def _per_trace(items: list[tuple[str, bytes]]) -> dict[str, list[bytes]]:
    out: dict[str, list[bytes]] = {}
    for tid, line in items:
        out.setdefault(tid, []).append(line)
    return out


@settings(max_examples=150, deadline=None)
@given(case=suites(), stream=streams(), data=st.data())
def test_hosted_traces_grade_as_grade_bytes(
    case: SuiteCase, stream: Stream, data: st.DataObject
) -> None:
    host = TraceHost(case.suite)
    jsonl = encode_jsonl(stream.events)
    stored: dict[str, bytes] = {}
    live: dict[str, TraceState] = {}
    verdicts: list[tuple[str, bytes]] = []
    decisions: list[tuple[str, bytes]] = []

    def keep(state: TraceState, outs: list) -> None:  # type: ignore[type-arg]
        for o in outs:
            assert o.trace_id == state.trace_id
            into = verdicts if o.kind == "verdict" else decisions
            into.append((o.trace_id, o.to_json()))

    for line in jsonl.splitlines(keepends=True):
        tid = host.trace_id_of(line)
        assert tid is not None
        state = live.pop(tid, None)
        if state is None:
            state = host.restore(stored[tid]) if tid in stored else host.open(tid)
        as_dict = data.draw(st.booleans(), label="fed as a mapping")
        keep(state, host.feed(state, msgspec.json.decode(line) if as_dict else line))
        if data.draw(st.booleans(), label="snapshot and restore"):
            stored[tid] = host.snapshot(state)
            assert state.closed or len(stored[tid]) <= _BOUND
        else:
            live[tid] = state
    for tid in sorted(stored.keys() | live.keys()):
        state = live.get(tid) or host.restore(stored[tid])
        keep(
            state,
            host.finish(state, reason=data.draw(st.sampled_from(["end", "idle"]))),
        )
        # A closed trace's state is a marker: its id, a flag, the header.
        assert state.closed and len(host.snapshot(state)) <= 64 + len(tid.encode())

    want = grade_bytes(case.suite, jsonl)
    assert want.errors == []
    assert _per_trace(verdicts) == _per_trace(
        [(v.trace_id, _ENC.encode(v)) for v in want.verdicts]
    )
    assert _per_trace(decisions) == _per_trace(
        [(d.trace_id, _ENC.encode(d)) for d in want.decisions]
    )


@settings(max_examples=100, deadline=None)
@given(case=suites(), stream=streams(max_traces=1), data=st.data())
def test_a_restore_changes_nothing(
    case: SuiteCase, stream: Stream, data: st.DataObject
) -> None:
    """Snapshot bytes restore to a state whose snapshot is the same bytes,
    and which grades the rest of the trace as the original does."""
    host = TraceHost(case.suite)
    lines = encode_jsonl(stream.events).splitlines(keepends=True)
    cut = data.draw(st.integers(0, len(lines)), label="cut")
    (tid,) = stream.traces
    state = host.open(tid)
    for line in lines[:cut]:
        host.feed(state, line)
    blob = host.snapshot(state)
    copy = host.restore(blob)
    assert host.snapshot(copy) == blob
    rest = [
        [o.to_json() for o in host.feed(s, line)]
        for s in (state, copy)
        for line in lines[cut:]
    ]
    half = len(rest) // 2
    assert rest[:half] == rest[half:]
    assert [o.to_json() for o in host.finish(state)] == [
        o.to_json() for o in host.finish(copy)
    ]
