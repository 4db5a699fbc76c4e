"""Sinks: where verdicts go. A sink takes verdicts and flushes them; a runner
flushes before it reports progress (and, with durable state, before it
commits positions).

A runner is handed a :class:`RunSink`: the verdict sink together with what
it can do beyond verdicts (take guard decisions, count for ``/metrics``,
feed telemetry beside stdout), declared by the one who built it rather than
probed for. :class:`trajgrade.sinks.tee.TeeSink` is the one the CLI builds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence

    from trajgrade.events import Event
    from trajgrade.verdicts import GuardDecision, Verdict

__all__ = ("DecisionSink", "RunSink", "Sink")


class Sink(Protocol):
    """Receives verdicts in decision order."""

    def send(self, verdicts: Sequence[Verdict]) -> None:
        """Queue verdicts for writing."""
        ...

    def flush(self) -> None:
        """Write everything queued; return once it is written."""
        ...

    def close(self) -> None:
        """Flush and release the destination."""
        ...


class DecisionSink(Protocol):
    """Takes guard decisions as the engine makes them (``--export-otlp``)."""

    def send_decisions(self, decisions: Sequence[GuardDecision]) -> None: ...


class RunSink(Sink, DecisionSink, Protocol):
    """A run's sink with its optional capabilities spelled out.

    ``send_decisions`` reaches the ``decision_sinks`` (none: the engine need
    not judge every call for them); ``collectors`` are Prometheus collectors
    to serve beside the run's own metrics; ``more`` are the sinks teed beside
    the verdict sink, which keep getting verdicts when a Kafka run writes
    them to a topic instead of stdout.
    """

    @property
    def more(self) -> Sequence[Sink]: ...

    @property
    def decision_sinks(self) -> Sequence[DecisionSink]: ...

    def observe_events(self, source: str, events: Sequence[Event]) -> None:
        """Decoded events and the input they came from (``--report``)."""
        ...

    @property
    def collectors(self) -> Sequence[Any]: ...
