"""A stateful model of the engine: events of several traces in any order,
traces ended by the runner, clock ticks and checkpoint/restore into a fresh
engine, with the finality rules and the counters checked after every step."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

import msgspec
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)
from strategies import RESULTS, TOOLS, args_for, suites

from trajgrade.engine.engine import Engine, TraceSnapshot
from trajgrade.events import (
    AgentError,
    ToolCall,
    ToolResult,
    TraceEnd,
    TurnStart,
    Usage,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from strategies import SuiteCase

    from trajgrade.events import Event
    from trajgrade.verdicts import Verdict

TRACES = st.sampled_from(["a", "b", "c", "d"])
DT = st.sampled_from([0.0, 0.001, 0.3, 1.0, 2.5])


class EngineMachine(RuleBasedStateMachine):
    """Drives one Engine (replaced by a restored copy on checkpoint) and a model of it."""

    def __init__(self) -> None:
        super().__init__()
        self.engine: Engine | None = None

    @initialize(case=suites(max_graders=4))
    def start(self, case: SuiteCase) -> None:
        self.case = case
        self.engine = Engine(case.suite)
        self.graders = [g.name for g in case.suite.graders]
        self.now = 0.0
        self.ts: dict[str, float] = {}
        self.calls: dict[str, list[str]] = defaultdict(list)
        self.n_ids = 0
        self.verdicts: dict[tuple[str, str], list[Verdict]] = defaultdict(list)
        #: Open in the engine; closed by this engine; closed before a restore.
        self.open: list[str] = []
        self.closed: set[str] = set()
        self.retired: set[str] = set()
        self._reset_counters()

    def _reset_counters(self) -> None:
        self.fed = 0
        self.emitted = 0
        self.early = 0
        self.late = 0
        self.n_closed = 0

    # ------------------------------------------------------------ helpers
    def _stamp(self, tid: str, dt: float) -> float:
        self.ts[tid] = self.ts.get(tid, 1000.0) + dt
        return self.ts[tid]

    def _finals(self, tid: str) -> int:
        return sum(
            1 for g in self.graders for v in self.verdicts.get((tid, g), ()) if v.final
        )

    def _record(self, out: Sequence[Verdict]) -> None:
        for v in out:
            self.verdicts[(v.trace_id, v.grader)].append(v)
            self.emitted += 1
            self.early += v.early

    def _close(self, tid: str) -> None:
        self.open.remove(tid)
        self.closed.add(tid)
        self.n_closed += 1
        assert self._finals(tid) == len(self.graders), (
            f"{tid} closed without all finals"
        )

    def _kept(self, tid: str) -> bool:
        """A trace whose verdicts are all final stays open for the guard
        while a grader judges calls, or once a grader that aborts failed."""
        suite = self.case.suite
        if any(callable(getattr(g, "judge", None)) for g in suite.graders):
            return True
        return any(
            v.outcome == "fail" and suite.on_fail[g] == "abort"
            for g in self.graders
            for v in self.verdicts.get((tid, g), ())
        )

    def _settle(self) -> None:
        """Traces whose graders are all final are dropped by the engine,
        unless the guard keeps them."""
        for tid in list(self.open):
            if self._finals(tid) == len(self.graders) and not self._kept(tid):
                self._close(tid)

    def _feed(self, event: Event) -> None:
        assert self.engine is not None
        tid = event.trace_id
        out = self.engine.feed(event, now=self.now)
        self.fed += 1
        if tid in self.closed:
            self.late += 1
            assert list(out) == [], "a closed trace was reopened by a late event"
            return
        if tid not in self.open:
            self.open.append(tid)
        self._record(out)
        if type(event) is TraceEnd:
            self._close(tid)
        else:
            self._settle()

    # ------------------------------------------------------------ rules
    @rule(tid=TRACES, name=st.sampled_from(TOOLS), dt=DT, data=st.data())
    def call(self, tid: str, name: str, dt: float, data: st.DataObject) -> None:
        if tid in self.retired:
            return
        cid: str | None = None
        if data.draw(st.integers(0, 4), label="with id") > 0:
            self.n_ids += 1
            cid = f"c{self.n_ids}"
            self.calls[tid].append(cid)
        self._feed(
            ToolCall(
                trace_id=tid,
                ts=self._stamp(tid, dt),
                name=name,
                call_id=cid,
                args=data.draw(args_for(name), label="args"),
            )
        )

    @rule(
        tid=TRACES,
        dt=DT,
        value=st.sampled_from(RESULTS),
        is_error=st.sampled_from([None, False, True]),
        data=st.data(),
    )
    def result(
        self,
        tid: str,
        dt: float,
        value: object,
        is_error: bool | None,
        data: st.DataObject,
    ) -> None:
        if tid in self.retired:
            return
        open_ids = self.calls[tid]
        cid = None
        if open_ids and data.draw(st.booleans(), label="by id"):
            cid = open_ids.pop(data.draw(st.integers(0, len(open_ids) - 1), label="i"))
        self._feed(
            ToolResult(
                trace_id=tid,
                ts=self._stamp(tid, dt),
                call_id=cid,
                result=value,
                is_error=is_error,
            )
        )

    @rule(tid=TRACES, dt=DT)
    def turn(self, tid: str, dt: float) -> None:
        if tid not in self.retired:
            self._feed(TurnStart(trace_id=tid, ts=self._stamp(tid, dt)))

    @rule(tid=TRACES, dt=DT, tokens=st.integers(0, 150))
    def usage(self, tid: str, dt: float, tokens: int) -> None:
        if tid not in self.retired:
            self._feed(
                Usage(
                    trace_id=tid,
                    ts=self._stamp(tid, dt),
                    input_tokens=tokens,
                    output_tokens=tokens // 2,
                )
            )

    @rule(tid=TRACES, dt=DT)
    def error(self, tid: str, dt: float) -> None:
        if tid not in self.retired:
            self._feed(AgentError(trace_id=tid, ts=self._stamp(tid, dt), message="x"))

    @rule(tid=TRACES, dt=DT)
    def trace_end(self, tid: str, dt: float) -> None:
        if tid not in self.retired:
            self._feed(TraceEnd(trace_id=tid, ts=self._stamp(tid, dt)))

    @rule(tid=TRACES)
    def end_trace(self, tid: str) -> None:
        assert self.engine is not None
        out = self.engine.end_trace(tid)
        if tid not in self.open:
            assert out == [], "end_trace of a trace that is not open gave verdicts"
            return
        self._record(out)
        assert all(v.final and not v.early for v in out)
        self._close(tid)

    @rule(dt=st.sampled_from([0.0, 0.5, 1.0, 3.0, 90.0]))
    def tick(self, dt: float) -> None:
        assert self.engine is not None
        self.now += dt
        out = self.engine.tick(self.now)
        self._record(out)
        assert all(v.early for v in out)
        self._settle()

    @rule()
    def checkpoint(self) -> None:
        assert self.engine is not None
        blob = msgspec.msgpack.encode(self.engine.snapshot())
        fresh = Engine(self.case.suite)
        fresh.restore(msgspec.msgpack.decode(blob, type=list[TraceSnapshot]))
        self.engine = fresh
        # A fresh engine does not remember traces closed before the snapshot:
        # those are never fed again (their late events would reopen them).
        self.retired |= self.closed
        self.closed = set()
        self._reset_counters()

    # ------------------------------------------------------------ invariants
    @invariant()
    def finality(self) -> None:
        for key, vs in self.verdicts.items():
            finals = [v for v in vs if v.final]
            sealed = [v for v in vs if not v.final]
            assert len(finals) <= 1, f"{key}: {len(finals)} final verdicts"
            assert len(sealed) <= 1, f"{key}: {len(sealed)} sealed verdicts"
            if finals:
                assert vs[-1].final, f"{key}: a verdict after the final one"
            assert len({v.outcome for v in vs}) == 1, f"{key}: outcome flipped: {vs}"
            assert len({v.id for v in vs}) == len(vs), f"{key}: duplicate verdict ids"

    @invariant()
    def counters(self) -> None:
        if self.engine is None:
            return
        stats = self.engine.statistics()
        assert stats.events == self.fed
        assert stats.verdicts == self.emitted
        assert stats.early_verdicts == self.early
        assert stats.late_events + stats.settled_events == self.late
        assert stats.closed_traces == self.n_closed
        assert stats.open_traces == len(self.open)
        assert stats.rejected_events == 0
        assert sorted(self.engine.open_traces()) == sorted(self.open)

    def teardown(self) -> None:
        if self.engine is None:
            return
        self._record(self.engine.finish())
        for tid in [*self.open, *self.closed, *self.retired]:
            assert self._finals(tid) == len(self.graders), f"{tid}: missing finals"
        self.finality()


def test_engine_keeps_finality_and_counters_under_any_operations() -> None:
    """Feeding, ending, ticking and checkpointing in any order keep finality and counters."""
    run_state_machine_as_test(
        EngineMachine,
        settings=settings(max_examples=100, stateful_step_count=30, deadline=None),
    )
