"""The run's observers: the status line and the metrics, kept current from
the engine's statistics while a run goes on (tasks of ``runner.run``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from trajgrade.runtime.exit_status import dropped_counts
from trajgrade.verdicts import Outcome

if TYPE_CHECKING:
    from trajgrade.runner.run_state import _Run
    from trajgrade.runtime.metrics import Metrics
    from trajgrade.runtime.status_line import StatusLine

__all__ = ("export", "show")


async def show(run: _Run, status: StatusLine) -> None:
    """Keep the status line current."""
    from trajgrade.runtime.status_line import REFRESH_SECONDS

    counts = run.summary.verdicts
    while True:
        stats = run.engine.statistics()
        status.update(
            events=stats.events,
            bytes_done=run.bytes_read,
            open_traces=stats.open_traces,
            passed=counts.get(Outcome.PASS, 0),
            failed=counts.get(Outcome.FAIL, 0) + counts.get(Outcome.ERROR, 0),
        )
        await anyio.sleep(REFRESH_SECONDS)


async def export(run: _Run, metrics: Metrics) -> None:
    """Keep the metrics current (a second's resolution is plenty)."""
    seen = 0
    while True:
        stats = run.engine.statistics()
        metrics.events.inc(stats.events - seen)
        seen = stats.events
        metrics.open_traces.set(stats.open_traces)
        lost = (stats.late_events, stats.settled_events, run.summary.input_errors)
        metrics.sync_dropped(dropped_counts(*lost))
        metrics.progress()  # the loop is alive, events or not
        await anyio.sleep(1.0)
