"""Checkpoint/restore at any point: snapshot the engine mid-stream, round-trip
the snapshot through msgpack, restore it into a fresh engine and go on; the
verdicts are those of an uninterrupted run."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import streams, suites

from trajgrade.engine.engine import Engine, EngineState, TraceSnapshot

if TYPE_CHECKING:
    from strategies import Stream, SuiteCase

    from trajgrade.verdicts import Verdict


def _key(v: Verdict) -> tuple[object, ...]:
    return (
        v.id,
        v.trace_id,
        v.grader,
        v.outcome,
        v.score,
        v.final,
        v.early,
        v.evidence,
        v.metadata,
        v.at_event,
    )


def _interrupted(
    case: SuiteCase, stream: Stream, cut: int
) -> tuple[list[Verdict], list[Verdict]]:
    """Verdicts before the snapshot (first engine) and after it (second engine)."""
    first = Engine(case.suite)
    before = first.feed_all(stream.events[:cut])
    blob = msgspec.msgpack.encode(first.snapshot())
    second = Engine(case.suite)
    second.restore(msgspec.msgpack.decode(blob, type=list[TraceSnapshot]))
    assert second.open_traces() == first.open_traces()
    seen = {ev.trace_id for ev in stream.events[:cut]}
    closed = seen - set(first.open_traces())
    # Traces closed before the snapshot are not in it; their late events would
    # reopen them in the second engine, so (like a runner that remembers them)
    # they are not fed again.
    rest = [ev for ev in stream.events[cut:] if ev.trace_id not in closed]
    after = second.feed_all(rest) + second.finish()
    return before, after


@settings(max_examples=200, deadline=None)
@given(case=suites(), stream=streams(), data=st.data())
def test_restored_run_equals_uninterrupted_run(
    case: SuiteCase, stream: Stream, data: st.DataObject
) -> None:
    """Verdicts before a snapshot plus verdicts after restoring it equal an uninterrupted run."""
    cut = data.draw(st.integers(0, len(stream.events)), label="cut")
    engine = Engine(case.suite)
    whole = engine.feed_all(stream.events) + engine.finish()
    before, after = _interrupted(case, stream, cut)
    assert [_key(v) for v in before + after] == [_key(v) for v in whole]


@settings(max_examples=200, deadline=None)
@given(case=suites(), stream=streams(), data=st.data())
def test_restored_verdicts_keep_the_producer_time(
    case: SuiteCase, stream: Stream, data: st.DataObject
) -> None:
    """Verdicts after a restore carry the same producer time (``ts``) as without it."""
    cut = data.draw(st.integers(0, len(stream.events)), label="cut")
    engine = Engine(case.suite)
    whole = engine.feed_all(stream.events) + engine.finish()
    before, after = _interrupted(case, stream, cut)
    assert [(v.id, v.ts) for v in before + after] == [(v.id, v.ts) for v in whole]


def _decoded(case: SuiteCase, snaps: list[TraceSnapshot]) -> list[tuple[object, ...]]:
    out = []
    for snap in snaps:
        states = [
            None if raw is None else msgspec.msgpack.decode(raw, type=g.state_type)
            for g, raw in zip(case.suite.graders, snap.states, strict=True)
        ]
        fields = msgspec.structs.asdict(snap)
        fields["states"] = states
        out.append(tuple(fields.items()))
    return out


@settings(max_examples=100, deadline=None)
@given(case=suites(), stream=streams(end=False), data=st.data())
def test_snapshot_of_a_restored_engine_is_the_same_state(
    case: SuiteCase, stream: Stream, data: st.DataObject
) -> None:
    """Snapshotting a freshly restored engine gives back the state it was restored from."""
    cut = data.draw(st.integers(0, len(stream.events)), label="cut")
    first = Engine(case.suite)
    first.feed_all(stream.events[:cut])
    snaps = first.snapshot()
    blob = msgspec.msgpack.encode(snaps)
    second = Engine(case.suite)
    second.restore(msgspec.msgpack.decode(blob, type=list[TraceSnapshot]))
    assert _decoded(case, second.snapshot()) == _decoded(case, snaps)


@settings(max_examples=200, deadline=None)
@given(case=suites(), stream=streams(), data=st.data())
def test_whole_engine_checkpoint_needs_no_help_from_the_runner(
    case: SuiteCase, stream: Stream, data: st.DataObject
) -> None:
    """``checkpoint``/``load`` carries closed ids and pending taints too: the
    rest of the stream, late events included, is fed unfiltered and the
    verdicts equal an uninterrupted run's (what ``--state`` relies on)."""
    cut = data.draw(st.integers(0, len(stream.events)), label="cut")
    lost = data.draw(st.sampled_from(["", "t0", "t1"]), label="rejected trace")
    engine = Engine(case.suite)
    if lost:
        engine.reject(lost, "a bad line")
    whole = engine.feed_all(stream.events) + engine.finish()
    first = Engine(case.suite)
    if lost:
        first.reject(lost, "a bad line")
    before = first.feed_all(stream.events[:cut])
    blob = msgspec.msgpack.encode(first.checkpoint())
    second = Engine(case.suite)
    second.load(msgspec.msgpack.decode(blob, type=EngineState))
    after = second.feed_all(stream.events[cut:]) + second.finish()
    assert [_key(v) for v in before + after] == [_key(v) for v in whole]
