"""The sink a command hands its runner: the verdict sink (stdout), then the
telemetry sinks teed beside it (JUnit, OTLP export), each with the roles its
builder gave it (takes guard decisions, has counters for ``/metrics``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence

    from trajgrade.events import Event
    from trajgrade.sinks import DecisionSink, Sink
    from trajgrade.verdicts import GuardDecision, Verdict

__all__ = ("EventObserver", "TeeSink")


class EventObserver(Protocol):
    """Shown the decoded events of each input (the run report)."""

    def observe_events(self, source: str, events: Sequence[Event]) -> None: ...


class TeeSink:
    """``first``, then ``more``: every verdict to each, in that order.

    ``decision_sinks`` (usually some of ``more``) get the guard decisions;
    ``collectors`` are served on ``/metrics``. Both are declared here, by
    whoever knows what the sinks are, so the runners need not probe for them.
    A :class:`trajgrade.sinks.RunSink`.
    """

    def __init__(
        self,
        first: Sink,
        more: Sequence[Sink] = (),
        *,
        decision_sinks: Sequence[DecisionSink] = (),
        collectors: Sequence[Any] = (),
        observers: Sequence[EventObserver] = (),
    ) -> None:
        self.first = first
        self.more = list(more)
        self.decision_sinks = list(decision_sinks)
        self.collectors = list(collectors)
        self.observers = list(observers)

    def send(self, verdicts: Sequence[Verdict]) -> None:
        self.first.send(verdicts)
        for s in self.more:
            s.send(verdicts)

    def send_decisions(self, decisions: Sequence[GuardDecision]) -> None:
        """Guard decisions (the engine's ``decisions``) to the sinks that take them."""
        for s in self.decision_sinks:
            s.send_decisions(decisions)

    def observe_events(self, source: str, events: Sequence[Event]) -> None:
        """Decoded events to the sinks that show them (``--report``)."""
        for s in self.observers:
            s.observe_events(source, events)

    def flush(self) -> None:
        self.first.flush()
        for s in self.more:
            s.flush()

    def close(self) -> None:
        # Every sink is closed even when one fails (a JUnit report that
        # cannot be written must not cost the exporter its last deliveries);
        # the first failure is raised after.
        failed: Exception | None = None
        for s in (self.first, *self.more):
            try:
                s.close()
            except Exception as exc:  # re-raised below
                failed = failed or exc
        if failed is not None:
            raise failed
