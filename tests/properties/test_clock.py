"""Ticking by deadlines gives what ticking every open trace gives.

The engine ticks a trace only when one of its clock-driven graders says its
``tick`` may decide something (``deadline``), and brings the trace up to the
latest tick before it closes or is snapshotted (trajgrade.engine.clock).
The reference is the same suite with ``deadline`` hidden from every grader,
which makes the engine tick every open trace on every tick, as it always
did. Random suites with a wall-time budget, interleaved traces on the
runner's clock (with and without producer time), ticks, idle timeouts and a
checkpoint restored into a fresh engine: the verdicts are equal, tick by
tick (within one tick, traces due together may come in another order), and
so are the snapshots and the final verdicts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec
from hypothesis import event, given, settings
from hypothesis import strategies as st
from strategies import maybe_untimed, streams, suites
from test_packing import _plain

from trajgrade.config.model import Suite
from trajgrade.engine.engine import Engine

if TYPE_CHECKING:
    from strategies import Stream, SuiteCase

    from trajgrade.verdicts import Verdict


class _EveryTick:
    """A grader as it is, except that it cannot tell its deadline."""

    def __init__(self, grader: Any) -> None:
        self._grader = grader

    def __getattr__(self, name: str) -> Any:
        if name == "deadline":
            raise AttributeError(name)
        return getattr(self._grader, name)


def _every_tick(suite: Suite) -> Suite:
    return Suite(
        [_EveryTick(g) for g in suite.graders],  # type: ignore[misc]
        fingerprint=suite.fingerprint,
        source=suite.source,
        on_fail=suite.on_fail,
        messages=suite.messages,
        rule_lines=suite.rule_lines,
    )


def _key(v: Verdict) -> tuple[Any, ...]:
    return (v.trace_id, v.grader, v.final, v.outcome, v.score, v.evidence, v.id)


def _same(ours: list[Verdict], ref: list[Verdict], *, ordered: bool) -> None:
    if ordered:
        assert ours == ref
    else:
        assert sorted(ours, key=_key) == sorted(ref, key=_key)


def _restored(engine: Engine, suite: Suite) -> Engine:
    blob = msgspec.msgpack.encode(engine.checkpoint())
    fresh = Engine(suite, warm_traces=1 if engine._packer else 0)
    fresh.load(msgspec.msgpack.decode(blob, type=type(engine.checkpoint())))
    return fresh


@settings(max_examples=300, deadline=None)
@given(
    case=suites(wall_time=True),
    stream=streams(max_traces=6, end=False),
    data=st.data(),
)
def test_ticking_by_deadlines_equals_ticking_every_trace(
    case: SuiteCase, stream: Stream, data: st.DataObject
) -> None:
    events = maybe_untimed(data, stream.events)
    reference_suite = _every_tick(case.suite)
    # Ours also packs idle traces at nearly every event (a tick that is due
    # unpacks them); the reference neither skips ticks nor packs.
    ours, ref = Engine(case.suite, warm_traces=1), Engine(reference_suite)
    assert (
        ours._clock.by_deadline and not ref._clock.by_deadline and ref._packer is None
    )
    restore_at = data.draw(st.integers(0, len(events)), label="checkpoint at")
    now = 0.0
    for k, ev in enumerate(events):
        if k == restore_at:
            assert _plain(ours.checkpoint()) == _plain(ref.checkpoint())
            ours, ref = _restored(ours, case.suite), _restored(ref, reference_suite)
        now += data.draw(st.sampled_from([0.0, 0.05, 0.4, 1.3]), label="dt")
        _same(ours.feed(ev, now=now), ref.feed(ev, now=now), ordered=True)
        assert ours.decisions == ref.decisions
        if ours._packer is not None and ours._packer.cold:
            event("traces packed")
        if data.draw(st.booleans(), label="tick"):
            now += data.draw(st.sampled_from([0.0, 0.6, 1.7, 5.0, 30.0]), label="t")
            _same(ours.tick(now), ref.tick(now), ordered=False)
            assert sorted(ours.open_traces()) == sorted(ref.open_traces())
        if data.draw(st.booleans(), label="idle timeout"):
            idle = data.draw(st.sampled_from([0.5, 2.0]), label="idle")
            _same(ours.expire(now, idle), ref.expire(now, idle), ordered=True)
    assert _plain(ours.checkpoint()) == _plain(ref.checkpoint())
    _same(ours.finish(), ref.finish(), ordered=True)


def test_ticks_before_any_budget_is_due_visit_no_trace() -> None:
    """The point of deadlines: a tick touches only the traces that are due."""
    from tests._support import call, suite

    s = suite("graders:\n  - {type: wall-time, name: w, config: {max: '60s'}}\n")
    engine = Engine(s, guarding=False)
    for k in range(2000):
        engine.feed(call("bash", f"c{k}", trace=f"t{k}"), now=100.0)
    for now in (101.0, 130.0, 159.0):
        assert engine.tick(now) == []
    assert all(tr.ticked is None for tr in engine._table.open.values())  # untouched
    out = engine.tick(160.01)  # 60.01 s: over the budget, each trace once
    assert {v.trace_id for v in out} == {f"t{k}" for k in range(2000)}
    assert all(not v.final for v in out)
    assert all(tr.ticked == 160.01 for tr in engine._table.open.values())


def test_a_closing_trace_reports_the_latest_tick() -> None:
    """A trace within its budget ends with the runner's clock of the latest
    tick in its verdict, as when every tick visited it."""
    from tests._support import call, suite

    s = suite("graders:\n  - {type: wall-time, name: w, config: {max: '60s'}}\n")
    for engine in (Engine(s), Engine(_every_tick(s))):
        engine.feed(call("bash", "c1", trace="t"), now=100.0)
        engine.tick(105.0)
        engine.tick(130.5)
        (final,) = engine.finish()
        assert final.metadata["value"] == 30500, final
        assert final.evidence.startswith("30500 ms")
