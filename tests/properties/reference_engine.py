"""A plain reference engine: every event to every grader's ``step``.

It is what :class:`trajgrade.engine.engine.Engine` computes, written as directly as
the engine's documented rules allow (its module docstring), with no routing,
no per-type handler tables, no batching and no shortcuts:

* each event is given to every grader of its trace that is not final yet
  and declares the event's type (``event_types``: the grader contract says
  other types are never passed), through the grader's public ``step`` (its
  ``handlers`` table, the engine's fast path, is not used);
* a final decision ends that grader on that trace; a sealed one is reported
  once, the first time;
* ``trace_end`` (after its ``step``) and ``finish`` give every grader still
  open its final verdict; a trace whose graders are all final is closed at
  once; events of a closed trace are ignored;
* a verdict's ``at_event`` is the number of the trace's events seen so far,
  its ``ts`` the last event timestamp seen;
* guard decisions (``decisions``): every non-pass verdict goes to the
  engine's :class:`~trajgrade.engine.guard.Guard` (the decision records), and
  every ``tool_call`` is put to *every* grader's ``judge`` after the
  graders stepped, with the trace's abort as it was before the event; a
  trace whose graders are all final stays open (stateless) while some
  grader judges calls or the trace was aborted.

Out of scope (not needed to prove routing): dataset rows, rejected records,
the clock, integrity anomalies, checkpoints.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trajgrade.engine.guard import Guard
from trajgrade.errors import GradeError
from trajgrade.events import ToolCall, TraceEnd
from trajgrade.verdicts import Decision, Outcome, Verdict, verdict_id

if TYPE_CHECKING:
    from trajgrade.config.model import Suite
    from trajgrade.engine.guard import AbortState
    from trajgrade.events import Event
    from trajgrade.verdicts import GuardDecision

__all__ = ("ReferenceEngine",)


class _Trace:
    def __init__(self, tid: str, states: list[Any]) -> None:
        self.id = tid
        self.states: list[Any] = states  # None once that grader is final
        self.sealed = [False] * len(states)
        self.events = 0
        self.last_ts: float | None = None
        self.abort: AbortState | None = None


class ReferenceEngine:
    """Grades interleaved traces one event and one grader at a time."""

    def __init__(self, suite: Suite) -> None:
        self.suite = suite
        self.graders = list(suite.graders)
        self.traces: dict[str, _Trace] = {}
        self.closed: set[str] = set()
        self.guard = Guard(suite, self.graders)
        #: Every guard decision so far, in order.
        self.decisions: list[GuardDecision] = self.guard.decisions

    def feed(self, event: Event) -> list[Verdict]:
        tid = event.trace_id
        if tid in self.closed:
            return []
        tr = self.traces.get(tid)
        if tr is None:
            tr = self.traces[tid] = _Trace(tid, [g.start() for g in self.graders])
        tr.events += 1
        if event.ts is not None:
            tr.last_ts = event.ts
        abort = tr.abort
        out: list[Verdict] = []
        for i, grader in enumerate(self.graders):
            if tr.states[i] is None or type(event) not in grader.event_types:
                continue
            try:
                d = grader.step(tr.states[i], event)
            except GradeError as exc:
                d = Decision(outcome=Outcome.ERROR, score=0.0, evidence=exc.message)
            if d is not None:
                out += self._verdict(tid, tr, i, d, early=True, event=event)
        if isinstance(event, TraceEnd):
            return out + self._close(tid, tr)
        if all(s is None for s in tr.states) and not (
            self.guard.judges or tr.abort is not None
        ):
            return out + self._close(tid, tr)
        if isinstance(event, ToolCall) and (self.guard.judges or abort is not None):
            self.guard.judge(tr, event, abort)
        return out

    def finish(self) -> list[Verdict]:
        out: list[Verdict] = []
        for tid, tr in list(self.traces.items()):
            out += self._close(tid, tr)
        return out

    def _close(self, tid: str, tr: _Trace) -> list[Verdict]:
        out: list[Verdict] = []
        for i, grader in enumerate(self.graders):
            if tr.states[i] is None:
                continue
            try:
                d = grader.finish(tr.states[i])
            except GradeError as exc:
                d = Decision(outcome=Outcome.ERROR, score=0.0, evidence=exc.message)
            d = Decision(
                outcome=d.outcome,
                score=d.score,
                evidence=d.evidence,
                metadata=d.metadata,
                final=True,
                matched=d.matched,
                message=d.message,
            )
            out += self._verdict(tid, tr, i, d, early=False)
        del self.traces[tid]
        self.closed.add(tid)
        return out

    def _verdict(
        self,
        tid: str,
        tr: _Trace,
        i: int,
        d: Decision,
        *,
        early: bool,
        event: Event | None = None,
    ) -> list[Verdict]:
        first = not tr.sealed[i]
        if d.final:
            tr.states[i] = None
        elif tr.sealed[i]:
            return []
        tr.sealed[i] = True
        grader = self.graders[i]
        evidence, matched, message = self.guard.telling.verdict_parts(i, d)
        v = Verdict(
            id=verdict_id(
                tid, grader.name, final=d.final, policy=self.suite.fingerprint
            ),
            trace_id=tid,
            grader=grader.name,
            kind=grader.kind,
            outcome=d.outcome,
            score=d.score,
            final=d.final,
            early=early,
            evidence=evidence,
            metadata=d.metadata,
            at_event=tr.events,
            ts=tr.last_ts,
            matched=matched,
            message=message,
        )
        if v.outcome is not Outcome.PASS:
            self.guard.verdict(tr, i, v, event, first=first)
        return [v]
