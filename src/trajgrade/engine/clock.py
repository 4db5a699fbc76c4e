"""The deadline clock: when a trace's clock-driven graders are ticked.

``tick(now)`` used to hand every open trace to every clock-driven grader:
with 100 k open traces that was about 43 ms of work ten times a second,
almost all of it deciding nothing.

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

:class:`TraceClock` is the engine's collaborator for this: it owns the
heap and the latest tick, and runs the graders' ``tick``; what they decide
is reported as every decision is (trajgrade.engine.reporting). Idle
timeouts are the engine's (a trace's last event on the runner's clock).
``tests/properties/test_clock.py`` compares this with ticking every trace.
"""

from __future__ import annotations

import heapq
import math
from itertools import count
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from trajgrade.engine.packing import Packer
    from trajgrade.engine.reporting import VerdictReporter
    from trajgrade.engine.state import _Trace
    from trajgrade.graders import Grader
    from trajgrade.graders.capabilities import Capabilities
    from trajgrade.verdicts import Verdict

__all__ = ("OpenTraces", "TraceClock", "check_clock")


class OpenTraces(Protocol):
    """What a tick needs of the engine's trace table
    (:class:`~trajgrade.engine.traces.TraceTable`)."""

    @property
    def open(self) -> dict[str, _Trace]:
        """Open traces by id."""
        ...

    def settle(self, tr: _Trace) -> bool:
        """A trace whose verdicts are all final: True when it was forgotten
        (else it is kept while its calls are still judged)."""
        ...


def check_clock(now: object) -> None:
    """Refuse a runner's clock reading that is not a finite number: a NaN
    would stop every wall-time budget and idle timeout for good, infinity
    crashed the deadline heap, a str a later tick."""
    if type(now) is bool or not isinstance(now, int | float) or not math.isfinite(now):
        msg = f"now must be a finite number of seconds since the epoch (time.time()), got {now!r}"
        raise ValueError(msg)


class TraceClock:
    """The runner's clock as the engine's clock-driven graders see it: the
    latest tick, and which open traces are due at the next one."""

    def __init__(
        self,
        graders: Sequence[Grader[Any]],
        capabilities: Sequence[Capabilities],
        packer: Packer | None,
        reporter: VerdictReporter,
    ) -> None:
        self._graders = graders
        #: Packed traces' states are read from their bytes for a deadline.
        self._packer = packer
        self._reporter = reporter
        #: The clock-driven graders, by index.
        self.clocked = tuple(i for i, g in enumerate(graders) if g.uses_clock)
        #: Ticks follow deadlines (else every open trace is ticked).
        self.by_deadline = bool(self.clocked) and all(
            capabilities[i].deadline is not None for i in self.clocked
        )
        #: The runner's clock at the latest tick.
        self.now: float | None = None
        #: (due on the runner's clock, push order, trace id), earliest first;
        #: entries of closed traces are dropped when popped or on a rebuild.
        self._due: list[tuple[float, int, str]] = []
        self._pushes = count()

    # ------------------------------------------------------------ ticks
    def tick_batches(
        self, now: float, table: OpenTraces, traces: int
    ) -> Iterator[list[Verdict]]:
        """Advance the latest tick to ``now`` and tick the open traces due
        (or every one), their verdicts ``traces`` traces at a time; a trace
        whose verdicts are all final then is settled, the others wait under
        their next deadline."""
        check_clock(now)
        if not self.clocked:
            return
        self.now = now
        opened = table.open
        due = self._pop_due(now, opened) if self.by_deadline else list(opened.values())
        out: list[Verdict] = []
        for k, tr in enumerate(due, start=1):
            if out and k % traces == 0:
                yield out
                out = []
            self.tick(tr, now, out)
            if not (tr.live == 0 and tr.id in opened and table.settle(tr)):
                self.schedule(tr, now)  # (when ticks follow deadlines)
        if out:
            yield out

    def tick(self, tr: _Trace, now: float, out: list[Verdict]) -> None:
        """Tick ``tr``'s clock-driven graders at ``now``; what they decide
        goes to ``out`` (trajgrade.engine.reporting)."""
        tr.ticked = now
        if tr.opened_at is None:
            return
        if tr.packed is not None:  # (due, or closing: unpacked like an event)
            self._packer.thaw(tr)  # type: ignore[union-attr]
        report = self._reporter.report
        for i in self.clocked:
            st = tr.states[i]
            if st is None:
                continue
            d = self._graders[i].tick(st, elapsed=now - tr.opened_at)
            if d is not None:
                report(out, tr, i, d, None, early=True)

    def catch_up(self, tr: _Trace) -> list[Verdict]:
        """Bring a trace's clock-driven graders up to the latest tick before
        anything reads their state (its next event, the guard's ruling on a
        call, its closing, its snapshot); by the deadlines' promise this
        decides nothing, and anything decided is still reported."""
        out: list[Verdict] = []
        now = self.now
        if now is not None and tr.ticked != now and self.by_deadline:
            self.tick(tr, now, out)
        return out

    def caught_up(self, tr: _Trace, states: list[Any]) -> list[Any]:
        """A packed trace's decoded ``states`` brought up to the latest tick
        for its snapshot (the trace itself stays packed, and behind)."""
        now = self.now
        if now is not None and tr.ticked != now and tr.opened_at is not None:
            for i in self.clocked:
                if (st := states[i]) is not None:
                    self._graders[i].tick(st, elapsed=now - tr.opened_at)
        return states

    # ------------------------------------------------------------ deadlines
    def opened(self, tr: _Trace) -> None:
        """A trace just opened: no tick before it concerns it; it waits
        under its first deadline."""
        if self.by_deadline:
            tr.ticked = self.now
            self.schedule(tr)

    def schedule(self, tr: _Trace, now: float | None = None) -> None:
        """Put an open trace under its earliest deadline (not before ``now``:
        an early deadline that decided nothing waits for the next tick)."""
        if not self.by_deadline or tr.opened_at is None:
            return
        states = tr.states
        if tr.packed is not None:  # (a heap rebuild: read, stay packed)
            states = self._packer.unpacked(tr)[0]  # type: ignore[union-attr]
        soonest = None
        for i in self.clocked:
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

    def _pop_due(self, now: float, traces: dict[str, _Trace]) -> list[_Trace]:
        """The open traces due by ``now``, each once, in deadline order."""
        heap = self._due
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
                    self.schedule(tr)
        return list(found.values())
