"""What a live async stream needs of the grader it feeds.

:class:`~trajgrade.api.streams.LiveStreams` works on a
:class:`~trajgrade.api.stream_grader.StreamGrader` through
:class:`StreamHost` alone, so the async side imports nothing of the grader
(and the grader imports the async side without a circle).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from trajgrade.events import Event

if TYPE_CHECKING:
    from trajgrade.engine.engine import Engine
    from trajgrade.verdicts import Verdict

__all__ = ("Feedable", "StreamHost")

#: What :meth:`StreamGrader.feed` accepts.
Feedable = Event | Mapping[str, Any] | str | bytes


class StreamHost(Protocol):
    """The grader's side of a live stream: feed one item, end one stream,
    and the clock and engine the stream consults."""

    @property
    def engine(self) -> Engine:
        """The engine whose open traces a stream's memory is pruned to."""
        ...

    @property
    def _clocked(self) -> bool:
        """Some grader reads the wall clock: a stream ticks it."""
        ...

    def finish(self) -> list[Verdict]:
        """The end of every open trace (the last stream's end)."""
        ...

    def tick(self, now: float | None = None) -> list[Verdict]:
        """Wall-time budgets fired between items."""
        ...

    def _feed_any(
        self, item: Feedable, source: str | None, traces: set[str]
    ) -> list[Verdict]:
        """One item of a stream; ``traces`` gets the ids of the traces it fed."""
        ...

    def _end_stream(
        self, source: str | None, traces: set[str], keep: set[str], *, close: bool
    ) -> list[Verdict]:
        """One stream's end while others still run: its own traces only."""
        ...
