"""Embedding: grade an agent's events from your own Python code.

The face of the package (names load on first use). Inside:
``stream_grader`` (:class:`StreamGrader`), ``records`` (what ``feed`` takes,
as the line it is graded as), ``streams`` (its live async sources, a
collaborator that works on it through ``stream_host``'s protocol),
``checkpoints`` (its state as bytes), ``checks`` (the checks of its
arguments); and ``trace_host`` (:class:`TraceHost`: one trace's state kept
by a stream processor, fed record by record, snapshotted as bytes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trajgrade._util.lazy import exporter

if TYPE_CHECKING:
    from trajgrade.api.stream_grader import Feedable, StreamGrader
    from trajgrade.api.trace_host import HostOutput, TraceHost, TraceState

__all__ = (
    "Feedable",
    "HostOutput",
    "StreamGrader",
    "TraceHost",
    "TraceState",
)

__getattr__ = exporter(
    __name__,
    {
        "Feedable": "trajgrade.api.stream_grader",
        "StreamGrader": "trajgrade.api.stream_grader",
        "HostOutput": "trajgrade.api.trace_host",
        "TraceHost": "trajgrade.api.trace_host",
        "TraceState": "trajgrade.api.trace_host",
    },
)
