"""The engine's memory of recently closed trace ids (bounded, oldest first).

A closed trace's late events are dropped (and counted), not graded as a new
trace; the engine remembers up to ``CLOSED_MEMORY`` closed ids per engine,
each with whether its trace ended explicitly, and forgets the oldest past
that. A Kafka partition tombstones the closed markers of forgotten ids.

Why not an ``OrderedDict``: it keeps a linked-list node per key and an
index of those nodes beside its dict, about 45 bytes per id more than a
plain dict with a deque of the same ids in closing order (measured: a
consumer that closes 100 k traces in one idle pass holds ~4.4 MB less).
A plain dict alone would do for the order too, but taking its oldest key
(``next(iter(d))``) walks over every key deleted before it, so evicting
one id at a time slows down the longer the run.

An id is let go out of order only when a checkpoint's trace opens it again
(``discard``); its place in the deque then no longer counts (``_stale``)
and is passed over when it comes up.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ("CLOSED_MEMORY", "ClosedIds")

#: How many closed trace ids are remembered to drop late events.
CLOSED_MEMORY: Final = 65_536


class ClosedIds:
    """Recently closed trace ids and whether each trace ended explicitly."""

    __slots__ = ("_ended", "_order", "_stale", "bound", "get")

    def __init__(self, bound: int = CLOSED_MEMORY) -> None:
        self.bound = bound
        self._ended: dict[str, bool] = {}
        #: Every id added, oldest first; an id's older places may be stale.
        self._order: deque[str] = deque()
        #: Per id, how many of its oldest places in ``_order`` no longer count.
        self._stale: dict[str, int] = {}
        #: ``get(trace_id)``: whether it ended explicitly; None if not closed
        #: (the dict's own method: the engine looks it up per unknown event).
        self.get: Callable[[str], bool | None] = self._ended.get

    def __contains__(self, trace_id: object) -> bool:
        return trace_id in self._ended

    def __len__(self) -> int:
        return len(self._ended)

    def add(self, trace_id: str, ended: bool) -> str | None:
        """Remember ``trace_id`` as closed (an id remembered already keeps
        its place); the id forgotten to stay within the bound, if any."""
        known = trace_id in self._ended
        self._ended[trace_id] = ended
        if known:
            return None
        self._order.append(trace_id)
        if len(self._ended) > self.bound:
            return self._forget_oldest()
        return None

    def discard(self, trace_id: str) -> None:
        """Forget ``trace_id`` (its trace is open again), if remembered."""
        if self._ended.pop(trace_id, None) is None:
            return
        self._stale[trace_id] = self._stale.get(trace_id, 0) + 1
        if len(self._order) > 2 * max(self.bound, len(self._ended)):
            self._order = deque(tid for tid, _ in self.items())
            self._stale.clear()

    def items(self) -> list[tuple[str, bool]]:
        """The ids and whether each ended, oldest first."""
        skip = dict(self._stale)
        out = []
        for tid in self._order:
            n = skip.get(tid)
            if n:
                skip[tid] = n - 1
                continue
            out.append((tid, self._ended[tid]))
        return out

    def _forget_oldest(self) -> str:
        order, stale = self._order, self._stale
        while True:
            tid = order.popleft()
            n = stale.get(tid)
            if n is None:
                break
            if n == 1:
                del stale[tid]
            else:
                stale[tid] = n - 1
        del self._ended[tid]
        return tid
