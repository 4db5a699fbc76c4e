"""Packing idle traces' grader states does not show in results.

With more than ``2 * warm_traces`` traces open, the engine packs the states
of traces that had no event since its last sweep into msgpack bytes and
unpacks them at their next event (trajgrade/engine/packing.py). An engine that
packs at nearly every batch (``warm_traces=1``) and one that never packs
(``warm_traces=0``) are fed the same random interleaved traces in the same
random batches, on random suites of every streaming grader type: their
verdicts, guard decisions and anomalies are equal after every batch, and a
checkpoint of the packing engine (packed traces unpacked for it) loaded
into a fresh one goes on to the same end. Checkpoints themselves may
differ where a settled grader came back on its routes after unpacking (as
after any restore) and kept reading events its outcome no longer depends
on; with no such grader they are equal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
from hypothesis import event, given, settings
from hypothesis import strategies as st
from strategies import streams
from test_routing import mixed_suites

from trajgrade.config.compile import compile_suite
from trajgrade.config.decode import decode_config
from trajgrade.config.model import Suite
from trajgrade.engine.engine import Engine, EngineState
from trajgrade.engine.packing import PACKED
from trajgrade.engine.state import NO_CALLS
from trajgrade.events import Event, ToolCall, ToolResult, TraceEnd, TurnStart

if TYPE_CHECKING:
    from strategies import Stream

    from trajgrade.verdicts import Verdict


@settings(max_examples=300, deadline=None)
@given(suite=mixed_suites(), stream=streams(max_traces=6), data=st.data())
def test_packing_equals_never_packing(
    suite: Suite, stream: Stream, data: st.DataObject
) -> None:
    packing, plain = Engine(suite, warm_traces=1), Engine(suite, warm_traces=0)
    got: list[Verdict] = []
    want: list[Verdict] = []
    events = stream.events
    cut = data.draw(st.integers(0, len(events)), label="checkpoint at")
    i = 0
    while i < len(events):
        n = data.draw(st.integers(1, 4), label="batch")
        batch = events[i : i + n]
        got += packing.feed_many(batch)
        want += plain.feed_many(batch)
        assert got == want
        assert packing.decisions == plain.decisions
        assert packing.anomalies == plain.anomalies
        assert packing.open_traces() == plain.open_traces()
        if packing._packer is not None and packing._packer.cold:
            event("some traces were packed")  # (--hypothesis-show-statistics)
        i += n
        if i >= cut > 0:
            # What a restart from this checkpoint would continue with.
            resumed = Engine(suite, warm_traces=1)
            resumed.load(packing.checkpoint())
            resumed.decisions.extend(packing.decisions)
            resumed.anomalies.extend(packing.anomalies)
            packing, cut = resumed, 0
    # End of input in batches of a few traces (what the runner writes as it
    # goes) gives finish()'s verdicts, in its order.
    per = data.draw(st.integers(1, 3), label="traces per finishing batch")
    got += [v for batch in packing.finish_batches(per) for v in batch]
    want += plain.finish()
    assert got == want
    assert packing.decisions == plain.decisions


def _plain(state: EngineState) -> object:
    """A checkpoint with each grader state decoded untyped: a state that went
    through msgpack holds ``0.0`` where a fresh one may hold ``0`` (a
    ``float`` field), as after any restore; the values are equal."""
    return (
        [
            (msgspec.structs.replace(t, states=[]), [_raw(s) for s in t.states])
            for t in state.traces
        ],
        state.closed,
        state.unopened,
    )


def _raw(state: bytes | None) -> object:
    return None if state is None else msgspec.msgpack.decode(state)


def _suite() -> Suite:
    return compile_suite(
        decode_config(
            "graders:\n"
            "  - {type: tool-calls, name: seq, config: {sequence: [view, bash]}}\n"
            "  - {type: tool-calls, name: never, config: {disallowed: [rm]}}\n"
            "  - {type: letta-tool, name: first, config: {extractor: tool_arguments,"
            " extractor_config: {tool_name: bash}, function: contains}}\n"
            "  - {type: tool_trajectory, name: exact, config: {mode: exact,"
            " expected: [{tool: view}, {tool: bash}]}}\n"
            "  - {type: tool-call-count, name: calls, config: {max: 3}}\n"
        )
    )


def _head(t: str) -> list[Event]:
    """A turn, a call and its result, then a call whose tool is running."""
    return [
        TurnStart(trace_id=t, step=0),
        ToolCall(trace_id=t, name="view", call_id=f"{t}-1", args={"path": "a"}),
        ToolResult(trace_id=t, call_id=f"{t}-1", result="x"),
        ToolCall(trace_id=t, name="bash", call_id=f"{t}-2", args={"command": "ls"}),
    ]


def _tail(t: str) -> list[Event]:
    return [
        ToolResult(trace_id=t, call_id=f"{t}-2", result="ok"),
        TraceEnd(trace_id=t),
    ]


def test_idle_traces_are_packed_and_come_back_the_same() -> None:
    """The property is not vacuous: with many traces open, idle ones hold
    only bytes (a fraction of their objects' size), and unpacked at their
    next event they grade as if never packed."""
    suite = _suite()
    heads = [ev for k in range(40) for ev in _head(f"t{k}")]
    tails = [ev for k in range(40) for ev in _tail(f"t{k}")]
    packing = Engine(suite, warm_traces=4)
    plain = Engine(suite, warm_traces=0)
    got = packing.feed_many(heads[:80]) + packing.feed_many(heads[80:])
    want = plain.feed_many(heads)
    cold = [tr for tr in packing._table.open.values() if tr.packed is not None]
    assert len(cold) >= 20  # the traces opened before the last sweep
    # Their states and their open call go into the bytes.
    assert all(tr.states is PACKED and tr.calls is NO_CALLS for tr in cold)
    assert all(len(tr.packed or b"") < 200 for tr in cold)
    assert _plain(packing.checkpoint()) == _plain(plain.checkpoint())
    got += packing.feed_many(tails) + packing.finish()
    want += plain.feed_many(tails) + plain.finish()
    assert got == want
    assert packing.anomalies == plain.anomalies == []  # every result paired


def test_a_clocked_grader_is_packed_only_when_it_has_a_deadline() -> None:
    """wall-time says when its tick is due, so its idle traces are packed
    (a due tick unpacks them, tests/properties/test_clock.py); a clocked
    grader without ``deadline`` would have every tick visit every trace."""
    from test_clock import _every_tick

    suite = compile_suite(
        decode_config("graders:\n  - {type: wall-time, name: w, config: {max: 60s}}\n")
    )
    for s, packs in ((suite, True), (_every_tick(suite), False)):
        engine = Engine(s, warm_traces=1)
        engine.feed_many([ev for k in range(10) for ev in _head(f"t{k}")], now=1.0)
        engine.feed_many([ev for k in range(10, 20) for ev in _head(f"t{k}")], now=2.0)
        cold = [tr for tr in engine._table.open.values() if tr.packed is not None]
        assert bool(cold) is packs
        if packs:  # a due tick unpacks what it ticks
            out = engine.tick(62.0)
            assert {v.trace_id for v in out} == {f"t{k}" for k in range(10)}
            assert all(engine._table.open[f"t{k}"].packed is None for k in range(10))


def test_a_third_party_grader_is_packed_only_when_it_says_so() -> None:
    """A plugin's state had to round-trip only for ``--state``: its suite is
    not packed unless the grader says ``packs_state = True``."""
    from trajgrade.graders.vally.tool_calls import ToolCalls

    class Plugin(ToolCalls):  # defined outside trajgrade: a third party's
        pass

    heads = [ev for k in range(20) for ev in _head(f"t{k}")]
    for says, packed in ((None, False), (True, True)):
        suite = _suite()
        g = suite.graders[0]
        plugin = Plugin.__new__(Plugin)
        plugin.__dict__.update(g.__dict__)
        if says is not None:
            plugin.packs_state = says  # type: ignore[attr-defined]
        # A Suite probes its graders when built (Suite.capabilities): build
        # one around the plugin rather than swap it into a built one.
        suite = Suite(
            (plugin, *suite.graders[1:]),
            fingerprint=suite.fingerprint,
            source=suite.source,
            on_fail=suite.on_fail,
            messages=suite.messages,
            rule_lines=suite.rule_lines,
        )
        engine = Engine(suite, warm_traces=1)
        engine.feed_many(heads[:40])
        engine.feed_many(heads[40:])
        cold = [tr for tr in engine._table.open.values() if tr.packed is not None]
        assert bool(cold) is packed
