"""The engine on the runner's clock: wall-time budgets and idle timeouts.

A mixin of :class:`trajgrade.engine.engine.Engine`. ``tick(now)`` used to hand
every open trace to every clock-driven grader: with 100 k open traces that
was about 43 ms of work ten times a second, almost all of it deciding
nothing.

A clock-driven grader that can say when its ``tick`` may next decide
something (``deadline(state)``: seconds after the trace opened, or None
for never) is ticked only then: each open trace waits in a heap under its
earliest deadline, and a tick pops only the traces that are due. What the
skipped ticks would have done decides nothing by the grader's own promise,
but it moves the grader's state (wall-time's clock value, reported in its
final verdict), so a trace is brought up to the latest tick before it
closes, before its next event (whose guard ruling may quote it) and before
its snapshot is taken: verdicts, decisions and checkpoints are what ticking
every trace gives. A deadline may come early (the trace is ticked and
waits again), never late, and events may only move it later. A suite with
a clock-driven grader that has no ``deadline`` ticks every trace, as before.

``tests/properties/test_clock.py`` compares this with ticking every trace.
"""

from __future__ import annotations

import heapq
import math
from itertools import count
from typing import TYPE_CHECKING, Any

from trajgrade.verdicts import Outcome

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

    from trajgrade.config.model import Suite
    from trajgrade.engine.guard import Guard
    from trajgrade.engine.packing import Packer
    from trajgrade.engine.state import _Trace
    from trajgrade.graders import Grader
    from trajgrade.verdicts import Decision, Verdict

__all__ = ("Clock", "check_clock")


def check_clock(now: object) -> None:
    """Refuse a runner's clock reading that is not a finite number: a NaN
    would stop every wall-time budget and idle timeout for good, infinity
    crashed the deadline heap, a str a later tick."""
    if type(now) is bool or not isinstance(now, int | float) or not math.isfinite(now):
        msg = f"now must be a finite number of seconds since the epoch (time.time()), got {now!r}"
        raise ValueError(msg)


class Clock:
    """Ticks, deadlines and idle timeouts for the engine."""

    # The engine's own fields and methods these use.
    suite: Suite
    _graders: Sequence[Grader[Any]]
    _traces: dict[str, _Trace]
    _clocked: tuple[int, ...]
    _guard: Guard
    _packer: Packer | None
    guarding: bool

    if TYPE_CHECKING:  # (declared only: the engine's own methods)

        def _stamp(
            self, tr: _Trace, i: int, d: Decision, *, early: bool
        ) -> Verdict | None: ...
        def _keep(self, tr: _Trace) -> bool: ...
        def _forget(self, tr: _Trace, *, ended: bool) -> None: ...
        def _close_batches(
            self, trs: list[_Trace], *, ended: bool, traces: int
        ) -> Iterator[list[Verdict]]: ...

    def _init_clock(self) -> None:
        capabilities = self.suite.capabilities
        #: Ticks follow deadlines (else every open trace is ticked).
        self._by_deadline = bool(self._clocked) and all(
            capabilities[i].deadline is not None for i in self._clocked
        )
        #: (due on the runner's clock, push order, trace id), earliest first;
        #: entries of closed traces are dropped when popped or on a rebuild.
        self._due: list[tuple[float, int, str]] = []
        self._pushes = count()
        #: The runner's clock at the latest tick.
        self._clock: float | None = None

    # ------------------------------------------------------------ ticks
    def tick(self, now: float) -> list[Verdict]:
        """Advance the runner's clock: clock-driven graders may fire."""
        return [v for batch in self.tick_batches(now) for v in batch]

    def tick_batches(self, now: float, traces: int = 1024) -> Iterator[list[Verdict]]:
        """:meth:`tick`, the verdicts of ``traces`` traces at a time (a burst
        of sessions started together reaches a wall-time budget together)."""
        check_clock(now)
        if not self._clocked:
            return
        self._clock = now
        every = not self._by_deadline
        due = list(self._traces.values()) if every else self._pop_due(now)
        out: list[Verdict] = []
        for k, tr in enumerate(due, start=1):
            if out and k % traces == 0:
                yield out
                out = []
            out += self._tick_trace(tr, now)
            if tr.live == 0 and tr.id in self._traces and not self._keep(tr):
                self._forget(tr, ended=False)
            elif self._by_deadline:
                self._schedule(tr, now)
        if out:
            yield out

    def _tick_trace(self, tr: _Trace, now: float) -> list[Verdict]:
        out: list[Verdict] = []
        tr.ticked = now
        if tr.opened_at is None:
            return out
        if tr.packed is not None:  # (due, or closing: unpacked like an event)
            self._packer.thaw(tr)  # type: ignore[union-attr]
        for i in self._clocked:
            st = tr.states[i]
            if st is None:
                continue
            d = self._graders[i].tick(st, elapsed=now - tr.opened_at)
            if d is not None and (v := self._stamp(tr, i, d, early=True)) is not None:
                out.append(v)
                if self.guarding and v.outcome is not Outcome.PASS:
                    self._guard.verdict(tr, i, v, None, first=True)
        return out

    def _caught_up(self, tr: _Trace, states: list[Any]) -> list[Any]:
        """A packed trace's decoded ``states`` brought up to the latest tick
        for its snapshot (the trace itself stays packed, and behind)."""
        clock = self._clock
        if clock is not None and tr.ticked != clock and tr.opened_at is not None:
            for i in self._clocked:
                if (st := states[i]) is not None:
                    self._graders[i].tick(st, elapsed=clock - tr.opened_at)
        return states

    def _catch_up(self, tr: _Trace) -> list[Verdict]:
        """Bring a trace's clock-driven graders up to the latest tick before
        anything reads their state (its next event, the guard's ruling on a
        call, its closing, its snapshot); by the deadlines' promise this
        decides nothing, and anything decided is still reported."""
        clock = self._clock
        if clock is None or tr.ticked == clock or not self._by_deadline:
            return []
        return self._tick_trace(tr, clock)

    # ------------------------------------------------------------ deadlines
    def _schedule(self, tr: _Trace, now: float | None = None) -> None:
        """Put an open trace under its earliest deadline (not before ``now``:
        an early deadline that decided nothing waits for the next tick)."""
        if not self._by_deadline or tr.opened_at is None:
            return
        states = tr.states
        if tr.packed is not None:  # (a heap rebuild: read, stay packed)
            states = self._packer.unpacked(tr)[0]  # type: ignore[union-attr]
        soonest = None
        for i in self._clocked:
            st = states[i]
            if st is not None:
                at = self._graders[i].deadline(st)  # type: ignore[attr-defined]
                if at is not None and (soonest is None or at < soonest):
                    soonest = at
        if soonest is None:
            return
        due = tr.opened_at + soonest
        if now is not None and due <= now:
            due = now
        heapq.heappush(self._due, (due, next(self._pushes), tr.id))

    def _pop_due(self, now: float) -> list[_Trace]:
        """The open traces due by ``now``, each once, in deadline order."""
        heap, traces = self._due, self._traces
        found: dict[str, _Trace] = {}
        while heap and heap[0][0] <= now:
            tid = heapq.heappop(heap)[2]
            tr = traces.get(tid)
            if tr is not None:
                found[tid] = tr
        if len(heap) > 2 * len(traces) + 1024:
            # Mostly closed traces' entries: rebuild from the open ones.
            self._due = []
            for tr in traces.values():
                if tr.id not in found:
                    self._schedule(tr)
        return list(found.values())

    # ------------------------------------------------------------ idle timeouts
    def idle_traces(self, now: float, idle: float) -> list[str]:
        """Ids of the traces :meth:`expire` would close now (so a runner can
        first flush what its readers still hold for them)."""
        limit = now - idle
        live = self._traces.values()
        return [t.id for t in live if t.seen_at is not None and t.seen_at <= limit]

    def expire(self, now: float, idle: float) -> list[Verdict]:
        """Close, as if they ended, the traces with no event for ``idle``
        seconds of the runner's clock (live sources with no end marker)."""
        return [v for batch in self.expire_batches(now, idle) for v in batch]

    def expire_batches(
        self, now: float, idle: float, traces: int = 1024
    ) -> Iterator[list[Verdict]]:
        """:meth:`expire`, ``traces`` traces at a time (see ``finish_batches``)."""
        return self.end_batches(self.idle_traces(now, idle), traces=traces)

    def end_batches(
        self, trace_ids: Iterable[str], traces: int = 1024
    ) -> Iterator[list[Verdict]]:
        """Close the given traces as if they ended, ``traces`` at a time;
        ids no longer open are passed over. A runner that called
        :meth:`idle_traces` (to flush what its readers hold for them) closes
        the same traces with this instead of scanning every open trace again."""
        find = self._traces.get
        trs = [tr for tid in trace_ids if (tr := find(tid)) is not None]
        return self._close_batches(trs, ended=True, traces=traces)
