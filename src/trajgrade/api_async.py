"""The async side of :class:`trajgrade.api.StreamGrader`: live sources.

A mixin (kept apart so api.py reads as the synchronous API it mostly is).
anyio is imported only when :meth:`AsyncStreams.grade_stream_to` runs, so
``import trajgrade`` stays light. Both helpers pull one item at a time and
hand its verdicts over before reading the next (backpressure: a slow
consumer slows the reading, nothing piles up), and both keep the verdicts
they decided but had not handed over when cancelled, for
``take_undelivered``: nothing fed is lost.
"""

from __future__ import annotations

import inspect
from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable

    from trajgrade.api import Feedable
    from trajgrade.verdicts import Verdict

__all__ = ("AsyncStreams",)


class AsyncStreams:
    """``grade_stream``, ``grade_stream_to`` and ``take_undelivered``."""

    _clocked: bool
    #: Verdicts an async stream decided but had not handed over when it was
    #: cancelled or left, oldest first.
    _undelivered: deque[Verdict]

    if TYPE_CHECKING:  # (declared only: StreamGrader's)

        def finish(self) -> list[Verdict]: ...
        def tick(self, now: float | None = None) -> list[Verdict]: ...
        def _feed_any(self, item: Feedable, source: str | None) -> list[Verdict]: ...

    # ------------------------------------------------------------ async
    async def grade_stream(
        self,
        items: AsyncIterable[Feedable],
        *,
        source: str | None = None,
        finish: bool = True,
    ) -> AsyncIterator[Verdict]:
        """Yield verdicts as the items of a live source decide them.

        ``bytes`` items are raw chunks of ``source`` (a pipe, a socket:
        framed by :meth:`feed_bytes`); anything else is one record
        (:meth:`feed`). At the end of ``items`` the open traces are finished
        (unless ``finish=False``). Wall-time budgets are checked at each item;
        use :meth:`grade_stream_to` to have them fire between items too.
        The next item is read only when the last verdict was taken
        (backpressure). Verdicts decided but not yet taken when the stream
        is cancelled or left are kept for :meth:`take_undelivered` once the
        stream is closed (``contextlib.aclosing``, or when it is collected).
        Several streams may run at once on one grader (one per source):
        each yields only the verdicts of its own items.
        """
        pending: deque[Verdict] = deque()
        try:
            async for item in items:
                pending.extend(self._feed_any(item, source))
                while pending:
                    yield pending.popleft()
            if finish:
                pending.extend(self.finish())
                while pending:
                    yield pending.popleft()
        finally:
            self._undelivered.extend(pending)

    async def grade_stream_to(
        self,
        items: AsyncIterable[Feedable],
        on_verdict: Callable[[Verdict], Awaitable[None] | None],
        *,
        source: str | None = None,
        finish: bool = True,
        tick_interval: float = 0.1,
    ) -> None:
        """Call ``on_verdict`` (plain or async) for every verdict of a live
        source; wall-time budgets fire on the clock between items. An
        exception of ``items`` or ``on_verdict`` is raised as it is (not in
        an exception group); cancelled, it keeps the verdicts not yet handed
        over for :meth:`take_undelivered`."""
        import anyio

        if not tick_interval > 0:  # (0 would spin the clock: a busy loop)
            msg = f"tick_interval must be a positive number of seconds, got {tick_interval!r}"
            raise ValueError(msg)
        pending: deque[Verdict] = deque()
        failed: list[Exception] = []

        async def deliver(verdicts: list[Verdict]) -> None:
            pending.extend(verdicts)
            while pending:
                result = on_verdict(pending.popleft())
                if inspect.isawaitable(result):
                    await result

        async def clock() -> None:
            try:
                while True:
                    await anyio.sleep(tick_interval)
                    await deliver(self.tick())
            except Exception as exc:  # (raised below, alone)
                failed.append(exc)
                tg.cancel_scope.cancel()

        try:
            async with anyio.create_task_group() as tg:
                if self._clocked:
                    tg.start_soon(clock)
                try:
                    async for item in items:
                        await deliver(self._feed_any(item, source))
                    if finish:
                        await deliver(self.finish())
                except Exception as exc:
                    failed.append(exc)
                tg.cancel_scope.cancel()
        finally:
            self._undelivered.extend(pending)
        if failed:
            raise failed[0]

    def take_undelivered(self) -> list[Verdict]:
        """The verdicts async streams decided but had not handed over when
        they were cancelled or their consumer stopped early, oldest first."""
        out = list(self._undelivered)
        self._undelivered.clear()
        return out
