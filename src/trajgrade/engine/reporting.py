"""Graders' decisions made into verdicts: the engine's finality rules.

:class:`VerdictReporter` is the engine's collaborator for every decision a
grader gives, wherever it comes from (an event, a tick, a dataset row, the
trace's end): it applies the finality rules to the trace (a final decision
ends that grader on it; a sealed one is reported once), stamps the
:class:`~trajgrade.verdicts.Verdict` (its id, the trace's event count and
timestamp), counts it, and gives a verdict that is not a pass to the guard
(:mod:`trajgrade.engine.guard`: the decision for the call that decided it,
the run's abort).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trajgrade.engine.routing import decide
from trajgrade.engine.state import closing_decision
from trajgrade.verdicts import Outcome, Verdict, id_suffixes, keyed_id

if TYPE_CHECKING:
    from collections.abc import Sequence

    from trajgrade.engine.guard import Guard
    from trajgrade.engine.state import _Trace
    from trajgrade.events import Event
    from trajgrade.graders import Grader
    from trajgrade.verdicts import Decision

__all__ = ("VerdictReporter",)


class VerdictReporter:
    """Stamps, counts and reports the verdicts of one engine's traces."""

    def __init__(
        self,
        graders: Sequence[Grader[Any]],
        guard: Guard,
        *,
        guarding: bool,
    ) -> None:
        self._graders = graders
        self._guard = guard
        #: False: nobody reads decisions, so verdicts do not go to the guard.
        self.guarding = guarding
        #: Verdict ids include the policy's digest: a changed policy's
        #: verdict on the same trace is a new verdict, not a duplicate.
        self._id_suffixes = tuple(id_suffixes(g.name, guard.policy) for g in graders)
        #: Verdicts stamped, and those of them given before their trace closed.
        self.n_verdicts = 0
        self.n_early = 0
        #: With :meth:`Engine.record_deciders`: each verdict decided on an
        #: event, with that event (the runner finds its line), until cleared.
        self.deciders: list[tuple[Verdict, Event]] | None = None

    def report(
        self,
        out: list[Verdict],
        tr: _Trace,
        i: int,
        d: Decision,
        event: Event | None,
        *,
        early: bool,
    ) -> None:
        """Grader ``i``'s decision on ``tr`` as a verdict in ``out`` (none
        when it was reported already); one that is not a pass goes to the
        guard (``event``: what decided it, None for a tick, a row, the end)."""
        first = not tr.sealed >> i & 1
        v = self._stamp(tr, i, d, early=early)
        if v is not None:
            out.append(v)
            if event is not None and self.deciders is not None:
                self.deciders.append((v, event))
            if self.guarding and v.outcome is not Outcome.PASS:
                self._guard.verdict(tr, i, v, event, first=first)

    def finish(self, tr: _Trace, out: list[Verdict]) -> None:
        """A closing trace: every grader still open gives its final verdict
        (``error`` for a trace that lost events, unless its outcome was sealed)."""
        graders, tainted = self._graders, tr.tainted
        for i, st in enumerate(tr.states):
            if st is None:
                continue
            d = decide(graders[i].finish, st)
            if d is None or not d.final or tainted is not None:
                d = closing_decision(d, tainted, sealed=bool(tr.sealed >> i & 1))
            self.report(out, tr, i, d, None, early=False)

    def _stamp(self, tr: _Trace, i: int, d: Decision, *, early: bool) -> Verdict | None:
        if d.final:
            tr.states[i] = None
            tr.live -= 1
        elif tr.sealed >> i & 1:
            return None  # already reported as sealed; wait for the final one
        tr.sealed |= 1 << i
        g = self._graders[i]
        self.n_verdicts += 1
        if early:
            self.n_early += 1
        evidence, matched, message = self._guard.telling.verdict_parts(i, d)
        return Verdict(
            id=keyed_id(tr.id, self._id_suffixes[i][d.final]),
            trace_id=tr.id,
            grader=g.name,
            kind=g.kind,
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
