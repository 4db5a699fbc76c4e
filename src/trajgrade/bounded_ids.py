"""A bounded memory of recent ids, oldest forgotten first, each with a flag.

The engine remembers up to ``CLOSED_MEMORY`` closed trace ids (with whether
each trace ended explicitly) so a closed trace's late events are dropped
and counted, not graded as a new trace; a Kafka partition tombstones the
closed markers of the ids it forgets. A run's summary remembers up to
``FAILED_MEMORY`` failed trace ids so a trace with several failing graders
counts once. Both used to be ``OrderedDict``s.

Why not an ``OrderedDict``: it keeps a linked-list node per key and an
index of those nodes beside its dict, about 45 bytes per id more than a
plain dict with a deque of the same ids in the order they came. Measured
in-process on the Kafka consumer's idle pass over 100 k traces (four
partitions, ``six.yaml``, every trace failing): the two memories went from
16.4 MiB (closed ids 8.7, failed ids 7.7) to 8.6 MiB. A plain dict alone would keep the order too, but taking its
oldest key (``next(iter(d))``) walks over every key deleted before it, so
forgetting one id at a time slows down the longer the run.

An id is let go out of order only when a checkpoint's trace opens it again
(``discard``); its place in the deque then no longer counts (``_stale``)
and is passed over when it comes up.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ("BoundedIds",)


class BoundedIds:
    """The ``bound`` most recent ids, each with a flag."""

    __slots__ = ("_flags", "_order", "_stale", "bound", "get")

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self._flags: dict[str, bool] = {}
        #: Every id added, oldest first; an id's older places may be stale.
        self._order: deque[str] = deque()
        #: Per id, how many of its oldest places in ``_order`` no longer count.
        self._stale: dict[str, int] = {}
        #: ``get(id)``: its flag, None if not remembered (the dict's own
        #: method: the engine looks one up per event of a trace not open).
        self.get: Callable[[str], bool | None] = self._flags.get

    def __contains__(self, trace_id: object) -> bool:
        return trace_id in self._flags

    def __len__(self) -> int:
        return len(self._flags)

    def add(self, trace_id: str, flag: bool) -> str | None:
        """Remember ``trace_id`` with ``flag`` (an id remembered already
        keeps its place); the id forgotten to stay within the bound, if any."""
        known = trace_id in self._flags
        self._flags[trace_id] = flag
        if known:
            return None
        self._order.append(trace_id)
        if len(self._flags) > self.bound:
            return self._forget_oldest()
        return None

    def discard(self, trace_id: str) -> None:
        """Forget ``trace_id`` (a closed trace open again), if remembered."""
        if self._flags.pop(trace_id, None) is None:
            return
        self._stale[trace_id] = self._stale.get(trace_id, 0) + 1
        if len(self._order) > 2 * max(self.bound, len(self._flags)):
            self._order = deque(tid for tid, _ in self.items())
            self._stale.clear()

    def items(self) -> list[tuple[str, bool]]:
        """The ids and their flags, oldest first."""
        skip = dict(self._stale)
        out = []
        for tid in self._order:
            n = skip.get(tid)
            if n:
                skip[tid] = n - 1
                continue
            out.append((tid, self._flags[tid]))
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
        del self._flags[tid]
        return tid
