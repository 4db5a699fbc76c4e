"""An engine that holds one trace at a time, for hosts that keep the state.

A stream processor (Quix Streams, Flink) keeps each key's state in its own
store and hands it over with each record. :class:`HostedEngine` is the
ordinary :class:`~trajgrade.engine.engine.Engine` used as a workbench: a call
loads one trace's :class:`~trajgrade.engine.state.EngineState` (its open
snapshot, its closed mark, or a taint waiting for it to open), runs the
engine's own feeding or closing on it, and gives the new state back, leaving
the engine empty. So a hosted trace is graded by exactly the code that grades
a file, and its state is exactly a checkpoint's.

Compiling an engine costs about 65 µs (routes, guard, reporter), a load and
a checkpoint of one trace a few: one engine serves every call of a host.
Idle traces are not packed here (the host's store holds them as bytes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trajgrade.engine.engine import Engine

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from trajgrade.config.model import Suite
    from trajgrade.engine.state import EngineState
    from trajgrade.verdicts import GuardDecision, Verdict

__all__ = ("HostedEngine",)


class HostedEngine(Engine):
    """One compiled suite; between calls it holds no trace."""

    def __init__(self, suite: Suite, *, samples: Mapping[str, Any] | None) -> None:
        super().__init__(suite, samples=samples, warm_traces=0)

    def run(
        self, state: EngineState, work: Callable[[Engine], list[Verdict]]
    ) -> tuple[EngineState, list[Verdict], list[GuardDecision]]:
        """``work`` on the engine holding ``state``: the state after it, its
        verdicts and its guard decisions (in order)."""
        self.load(state)
        try:
            verdicts = work(self)
            return self.checkpoint(), verdicts, list(self.decisions)
        finally:
            self.decisions.clear()
            self.anomalies.clear()
            self._table.clear()
