"""Embedding: grade an agent's events from your own Python code.

The face of the package (names load on first use). Inside:
``stream_grader`` (:class:`StreamGrader`), ``records`` (what ``feed`` takes,
as the line it is graded as), ``streams`` (its live async sources, a
collaborator that works on it through ``stream_host``'s protocol),
``checkpoints`` (its state as bytes), ``checks`` (the checks of its
arguments).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trajgrade._util.lazy import exporter

if TYPE_CHECKING:
    from trajgrade.api.stream_grader import Feedable, StreamGrader

__all__ = (
    "Feedable",
    "StreamGrader",
)

__getattr__ = exporter(
    __name__,
    {
        "Feedable": "trajgrade.api.stream_grader",
        "StreamGrader": "trajgrade.api.stream_grader",
    },
)
