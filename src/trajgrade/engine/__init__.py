"""The engine: events in, verdicts and guard decisions out; no I/O, no clock.

The face of the package (names load on first use). Inside: ``engine`` (the
:class:`Engine` and its feeding loop), ``state`` (its records), and its
collaborators: ``traces`` (opening, closing, remembering and checkpointing
traces), ``reporting`` (decisions made verdicts), ``clock`` (ticks and
deadlines), ``input`` (events built in code, checked), ``dataset`` (which
rows found their trace), ``routing`` (which graders an event concerns),
``guard`` (a decision for every call), ``packing`` (idle traces' states as
bytes), ``hosted`` (one trace at a time, its state kept by a host).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trajgrade._util.lazy import exporter

if TYPE_CHECKING:
    from trajgrade.engine.engine import (
        Anomaly,
        Engine,
        EngineState,
        EngineStats,
        TraceSnapshot,
    )

__all__ = (
    "Anomaly",
    "Engine",
    "EngineState",
    "EngineStats",
    "TraceSnapshot",
)

__getattr__ = exporter(
    __name__,
    {
        "Anomaly": "trajgrade.engine.engine",
        "Engine": "trajgrade.engine.engine",
        "EngineState": "trajgrade.engine.engine",
        "EngineStats": "trajgrade.engine.engine",
        "TraceSnapshot": "trajgrade.engine.engine",
    },
)
