"""The engine: events in, verdicts out. No I/O, no clock, no logging.

Theory of operation
-------------------
The engine routes each event to its trace by ``trace_id`` (traces may be
interleaved) and hands it, with their per-trace state, to the graders whose
compiled route (:mod:`trajgrade.engine.routing`: per event type and tool name) it
is on. A grader answers ``None`` (nothing new), a sealed decision (outcome
fixed) or a final decision (outcome and score fixed). The engine stamps them
into :class:`~trajgrade.verdicts.Verdict`s and enforces the finality rules:

* a final verdict ends that grader on that trace: its state is dropped and it
  is never stepped again (h11's "terminal states stay terminal");
* a trace that gets ``trace_end``, or is closed by the runner (end of input,
  idle timeout), gives every grader still open its final verdict;
* a trace whose graders are all final is dropped at once; its id is
  remembered (bounded) so late events are ignored instead of reopening it.

Time is data: ``feed(event, now=...)`` records the runner's clock; ``tick(now)``
lets clock-driven graders (wall-time) fire while no event arrives.

Guard decisions (:mod:`trajgrade.engine.guard`): every ``tool_call`` a grader
forbids gives a :class:`~trajgrade.verdicts.GuardDecision` in ``decisions``
(drained by the caller), every time, also after that grader's verdict is
final; a trace whose graders are all final is kept for that (at most
``GUARD_MEMORY`` of them) while a grader judges calls or it was aborted.

Integrity: open call ids are tracked per trace to report orphan results,
reused ids and calls unanswered at the end (``anomalies``, drained by the
runner); rejected events (``reject``) taint a trace: its graders end in ``error``.

Memory: past ``2 * warm_traces`` open traces, the grader states of idle
traces are packed into bytes until their next event (:mod:`trajgrade.engine.packing`).

``feed`` raises nothing for bad data: a grader's other exceptions are its bugs.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Final

from trajgrade._util.bounded_ids import BoundedIds
from trajgrade.engine.checkpoint import Checkpoints
from trajgrade.engine.clock import Clock
from trajgrade.engine.dataset import NO_ROW, DatasetRows
from trajgrade.engine.guard import Guard
from trajgrade.engine.input import CheckedInput
from trajgrade.engine.packing import WARM_TRACES, Packer
from trajgrade.engine.routing import Routes, decide
from trajgrade.engine.state import (
    CLOSED_MEMORY,
    NO_CALLS,
    Anomaly,
    EngineState,
    EngineStats,
    TraceSnapshot,
    _Trace,
    call_anomaly,
    closing_decision,
    unanswered,
)
from trajgrade.errors import GradeError
from trajgrade.events import (
    OPEN_CALLS_MAX,
    Event,
    LeanResult,
    ToolCall,
    ToolResult,
    TraceEnd,
    TraceStart,
)
from trajgrade.verdicts import (
    SETTLED,
    Decision,
    GuardDecision,
    Outcome,
    Verdict,
    grader_failed,
    id_suffixes,
    keyed_id,
)

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

    from trajgrade.config.model import Suite

__all__ = ("Anomaly", "Engine", "EngineState", "EngineStats", "TraceSnapshot")

_NOTHING: Final[tuple[Verdict, ...]] = ()
_GONE: Final = object()
#: How many traces whose verdicts are all final are kept for guarding their
#: later calls; beyond that the oldest is closed (its late calls: undecided).
GUARD_MEMORY: Final = 65_536


class Engine(CheckedInput, Checkpoints, Clock, DatasetRows):
    """Grades any number of interleaved traces with one compiled Suite.

    The Suite may be shared by engines in many threads; an engine is one
    stream's state, used by one thread at a time (not checked here: the
    per-event path stays lean; StreamGrader checks it)."""

    def __init__(
        self,
        suite: Suite,
        *,
        check_integrity: bool = True,
        samples: Mapping[str, Any] | None = None,
        guarding: bool = True,
        warm_traces: int = WARM_TRACES,
    ) -> None:
        self.suite = suite
        #: Dataset rows by trace id; a trace's row reaches its graders as a
        #: ``trace_start`` event with ``metadata["sample"]`` when it opens.
        self._samples = samples
        self._init_rows()  # (which rows found a trace: engine_dataset)
        self._graders = suite.graders
        self._traces: dict[str, _Trace] = {}
        #: Closed ids (bounded, oldest forgotten first): late events dropped.
        self._closed: BoundedIds[bool] = BoundedIds(CLOSED_MEMORY)
        #: Traces a rejected record named before any of their events
        #: arrived, with the reason (bounded as the closed ids are).
        self._unopened: BoundedIds[str] = BoundedIds(CLOSED_MEMORY)
        self._clocked = tuple(i for i, g in enumerate(self._graders) if g.uses_clock)
        self._init_clock()
        self._integrity = check_integrity
        #: Anomalies found since the runner last cleared this list.
        self.anomalies: list[Anomaly] = []
        #: False: nobody reads decisions (a plain ``grade``), so calls are
        #: not judged and no trace is kept for guarding; verdicts are the same.
        self.guarding = guarding
        self._guard = Guard(suite, self._graders)
        self._judges = self._guard.judges
        # Per event type and tool name: the graders that can react.
        self._routing = Routes(self._graders, suite.capabilities, self._judges)
        self._id_suffixes = tuple(id_suffixes(g.name) for g in self._graders)
        #: Packs idle traces' states once more than twice ``warm_traces``
        #: are open (trajgrade.engine.packing); None: never (0, or a clocked grader
        #: without a deadline).
        self._packer = Packer.for_suite(
            self._graders, suite.capabilities, warm=warm_traces
        )
        self._routes = self._routing.by_type
        #: Traces kept only for guarding (every verdict final), oldest first.
        self._kept: OrderedDict[str, None] = OrderedDict()
        #: With :meth:`log_closes`: ids of the traces closed, and of the
        #: closed ids forgotten (the oldest past ``CLOSED_MEMORY``), since
        #: the caller last cleared these lists; else None.
        self.closes: list[str] | None = None
        self.forgotten: list[str] | None = None
        self._n_events = 0
        self._n_verdicts = 0
        self._n_early = 0
        self._n_closed = 0
        self._n_late = 0
        self._n_settled = 0
        self._n_rejected = 0

    # ------------------------------------------------------------ feeding
    # (feed and feed_all, which check events built in code: engine_input)
    def feed_many(
        self,
        events: Sequence[Event],
        *,
        now: float | None = None,
        default_trace: str = "",
    ) -> list[Verdict]:
        """Process events in order; return the verdicts they decided, in order.

        Events with an empty ``trace_id`` belong to ``default_trace`` (a
        source's own trace). They are not checked (decoders check every
        record; ``feed`` checks events built in code). Anomalies found are
        appended to ``anomalies`` with the position of their event in
        ``events``. This is the one implementation of feeding; its loop is
        written out in full because it runs once per event.
        """
        out: list[Verdict] = []
        traces = self._traces
        routes = self._routes
        routing = self._routing
        by_name = routing.by_name
        judges_by_name = routing.judges_by_name
        parkable = routing.parkable
        integrity = self._integrity
        guarding = self.guarding
        clock = self._clock if self._by_deadline else None
        find = traces.get
        for event in events:
            tid = event.trace_id or default_trace
            tr = find(tid)  # (not try/except: the events of settled traces miss)
            if tr is None:
                ended = self._closed.get(tid)
                if ended is not None:
                    # Dropped (counted): its trace ended, or all is final.
                    if ended:
                        self._n_late += 1
                    else:
                        self._n_settled += 1
                    continue
                tr = self._open(tid, now)
                if self._unopened:
                    tr.tainted = self._unopened.pop(tid)
                if (row := self._row_of(tid)) is not NO_ROW:
                    out.extend(self._introduce(tr, row))
                    if tr.live == 0 and not self._keep(tr):
                        self._forget(tr, ended=False)
                        continue
            if tr.packed is not None:  # (only a packer packs: it is set)
                self._packer.thaw(tr)  # type: ignore[union-attr]
            if clock is not None and tr.ticked != clock:
                out += self._catch_up(tr)  # ticks it skipped (engine_clock)
            tr.events += 1
            if now is not None:
                tr.seen_at = now
            ts = event.ts
            if ts is not None:
                tr.last_ts = ts
            kind = type(event)
            if kind is ToolCall:
                abort = tr.abort
                name: str = event.name  # type: ignore[union-attr,assignment]
                route = by_name.get(name)
                if route is None:
                    route = routing.call_route(name)
                if integrity and (cid := event.call_id) is not None:  # type: ignore[union-attr]
                    calls = tr.calls
                    if calls is NO_CALLS:
                        calls = tr.calls = {}
                    n = len(calls)
                    calls[cid] = None
                    if len(calls) == n:
                        self._anomaly(tr, "duplicate_call_id", cid, event)
                    elif n >= OPEN_CALLS_MAX:
                        del calls[next(iter(calls))]
            else:
                route = routes[kind]
                if kind is ToolResult or kind is LeanResult:
                    cid = event.call_id  # type: ignore[union-attr]
                    if integrity and cid is not None:
                        calls = tr.calls
                        if calls.pop(cid, _GONE) is _GONE:
                            self._anomaly(tr, "orphan_result", cid, event)
                        elif not calls:
                            tr.calls = NO_CALLS  # an emptied dict keeps its table
                elif kind is TraceStart and tr.parked:
                    tr.unpark()  # it may bring what a settled grader waits for
            if route:
                states = tr.states
                for i, handler in route:
                    st = states[i]
                    if st is None:
                        continue
                    try:
                        d = handler(st, event)
                    except GradeError as exc:
                        d = Decision(
                            outcome=Outcome.ERROR, score=0.0, evidence=exc.message
                        )
                    except Exception as exc:  # a grader bug: one error, not a crash
                        d = grader_failed(exc)
                    if d is not None:
                        if d is SETTLED:
                            if i in parkable:
                                tr.park(i)
                            continue
                        first = not tr.sealed >> i & 1
                        v = self._stamp(tr, i, d, early=True)
                        if v is not None:
                            out.append(v)
                            if guarding and v.outcome is not Outcome.PASS:
                                self._guard.verdict(tr, i, v, event, first=first)
                        if tr.live == 0 and kind is not TraceEnd:
                            if self._keep(tr):
                                continue
                            # Every grader is final: nothing more to learn.
                            self._forget(tr, ended=False)
                            break
            if kind is ToolCall and guarding and tr.id in traces:  # not forgotten
                judges = judges_by_name.get(name)
                if judges is None:
                    judges = routing.call_judges(name)
                if judges or abort is not None:
                    self._guard.judge(tr, event, abort, judges)  # type: ignore[arg-type]
            if kind is TraceEnd:
                out.extend(self._close(tr, ended=True))
        self._n_events += len(events)
        if self._packer is not None:
            self._packer.sweep(traces, self._n_events)
        return out

    def end_trace(self, trace_id: str) -> list[Verdict]:
        """Close one trace as if its ``trace_end`` arrived (idle timeout, …)."""
        tr = self._traces.get(trace_id)
        return self._close(tr, ended=True) if tr is not None else []

    def finish(self) -> list[Verdict]:
        """End of input: every open trace gives its final verdicts."""
        return [v for batch in self.finish_batches() for v in batch]

    def finish_batches(self, traces: int = 1024) -> Iterator[list[Verdict]]:
        """:meth:`finish`, the verdicts of ``traces`` traces at a time: a
        runner writes each batch before the next is built (ending a run with
        a hundred thousand traces open does not hold all their verdicts)."""
        for tid, reason in self._unopened.items():
            # Traces whose only records were lost still get (error) verdicts.
            self._open(tid, None).tainted = reason
        self._unopened.clear()
        yield from self._close_batches(
            list(self._traces.values()), ended=False, traces=traces
        )

    def reject(self, trace_id: str, reason: str) -> None:
        """An event of ``trace_id`` was lost (undecodable, wrong types): its
        graders that are still open end in ``error`` instead of guessing."""
        self._n_rejected += 1
        if trace_id in self._closed:
            return
        tr = self._traces.get(trace_id)
        if tr is None:
            # Opened by its first good event (which brings the runner's clock
            # and its dataset row), or at the end if none comes.
            if trace_id not in self._unopened:
                self._remember_unopened(trace_id, reason)
        elif tr.tainted is None:
            tr.tainted = reason

    @property
    def decisions(self) -> list[GuardDecision]:
        """Guard decisions since the caller last cleared this list (drain
        it with ``.clear()``, like ``anomalies``)."""
        return self._guard.decisions

    def log_closes(self) -> None:
        """Start listing closed and forgotten ids (``closes``, ``forgotten``):
        a Kafka partition writes and tombstones its closed markers from them
        instead of keeping a second memory of closed ids."""
        self.closes, self.forgotten = [], []

    # ------------------------------------------------------------ queries
    def open_traces(self) -> list[str]:
        """Ids of the traces still open, oldest first."""
        return list(self._traces)

    def statistics(self) -> EngineStats:
        """Counters since creation."""
        return EngineStats(
            events=self._n_events,
            open_traces=len(self._traces),
            closed_traces=self._n_closed,
            verdicts=self._n_verdicts,
            early_verdicts=self._n_early,
            late_events=self._n_late,
            settled_events=self._n_settled,
            rejected_events=self._n_rejected,
        )

    # ------------------------------------------------------------ state
    def is_closed(self, trace_id: str) -> bool:
        """True when ``trace_id`` was closed recently (its late events are dropped)."""
        # (the dict's own get: a Kafka poll asks this of every trace it names)
        return self._closed.get(trace_id) is not None

    # ------------------------------------------------------------ internals
    def _open(self, trace_id: str, now: float | None) -> _Trace:
        tr = _Trace(trace_id, [g.start() for g in self._graders], now)
        self._traces[trace_id] = tr
        if self._by_deadline:
            tr.ticked = self._clock  # (no tick before it opened concerns it)
            self._schedule(tr)
        return tr

    def _introduce(self, tr: _Trace, sample: Any) -> list[Verdict]:
        """Give a newly opened trace's graders its dataset row."""
        event = TraceStart(trace_id=tr.id, metadata={"sample": sample})
        out = []
        for i, handler in self._routes[TraceStart]:
            st = tr.states[i]
            if st is None:
                continue
            d = decide(handler, st, event)
            if d is not None and (v := self._stamp(tr, i, d, early=True)) is not None:
                out.append(v)
                if self.guarding and v.outcome is not Outcome.PASS:
                    self._guard.verdict(tr, i, v, None, first=True)
        return out

    def _stamp(self, tr: _Trace, i: int, d: Decision, *, early: bool) -> Verdict | None:
        if d.final:
            tr.states[i] = None
            tr.live -= 1
        elif tr.sealed >> i & 1:
            return None  # already reported as sealed; wait for the final one
        tr.sealed |= 1 << i
        g = self._graders[i]
        self._n_verdicts += 1
        if early:
            self._n_early += 1
        return Verdict(
            id=keyed_id(tr.id, self._id_suffixes[i][d.final]),
            trace_id=tr.id,
            grader=g.name,
            kind=g.kind,
            outcome=d.outcome,
            score=d.score,
            final=d.final,
            early=early,
            evidence=d.evidence,
            metadata=d.metadata,
            at_event=tr.events,
            ts=tr.last_ts,
        )

    def _close(self, tr: _Trace, *, ended: bool) -> list[Verdict]:
        if tr.packed is not None:
            self._packer.thaw(tr)  # type: ignore[union-attr]
        if tr.parked:
            tr.unpark()  # settled graders give their final verdicts too
        if self._integrity and tr.calls:
            # Calls a trace ends with unanswered are kept (graders never
            # invent results) and reported once, here.
            self.anomalies.append(unanswered(tr.id, list(tr.calls)))
        out = self._catch_up(tr)  # (ticks it skipped: engine_clock)
        graders, tainted = self._graders, tr.tainted
        for i, st in enumerate(tr.states):
            if st is None:
                continue
            first = not tr.sealed >> i & 1
            d = decide(graders[i].finish, st)
            if d is None or not d.final or tainted is not None:
                d = closing_decision(d, tainted, sealed=not first)
            v = self._stamp(tr, i, d, early=False)
            if v is not None:
                out.append(v)
                if self.guarding and v.outcome is not Outcome.PASS:
                    self._guard.verdict(tr, i, v, None, first=first)
        self._forget(tr, ended=ended)
        return out

    def _close_batches(
        self, trs: list[_Trace], *, ended: bool, traces: int
    ) -> Iterator[list[Verdict]]:
        out: list[Verdict] = []
        for k, tr in enumerate(trs, start=1):
            out.extend(self._close(tr, ended=ended))
            if k % traces == 0:
                yield out
                out = []
        if out:
            yield out

    def _forget(self, tr: _Trace, *, ended: bool) -> None:
        del self._traces[tr.id]
        if self._kept:
            self._kept.pop(tr.id, None)
        self._n_closed += 1
        old = self._closed.add(tr.id, ended)
        if self.closes is not None:
            self.closes.append(tr.id)
        if old is not None and self.forgotten is not None:
            self.forgotten.append(old)

    # ------------------------------------------------------------ guard
    def _keep(self, tr: _Trace) -> bool:
        """Keep a trace whose verdicts are all final: its calls are still
        judged (a grader judges calls, or the run was aborted)."""
        if not self.guarding or (not self._judges and tr.abort is None):
            return False
        kept = self._kept
        if tr.id not in kept:
            kept[tr.id] = None
            if len(kept) > GUARD_MEMORY:
                old = self._traces.get(next(iter(kept)))
                if old is not None and old is not tr:
                    self._close(old, ended=False)
        return True

    def _remember_unopened(self, trace_id: str, reason: str) -> None:
        """Past CLOSED_MEMORY such traces the oldest is let go (its errors
        were reported where they were read; it gets no verdict of its own)."""
        old = self._unopened.add(trace_id, reason)
        if old is not None and self.forgotten is not None:
            self.forgotten.append(old)  # (its taint marker goes too)

    def _anomaly(self, tr: _Trace, kind: str, cid: str, event: Event) -> None:
        self.anomalies.append(call_anomaly(tr.id, kind, cid, event))
