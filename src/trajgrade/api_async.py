"""The async side of :class:`trajgrade.api.StreamGrader`: live sources.

A mixin (kept apart so api.py reads as the synchronous API it mostly is).
anyio is imported only when :meth:`AsyncStreams.grade_stream_to` runs, so
``import trajgrade`` stays light. Both helpers pull one item at a time and
hand its verdicts over before reading the next (backpressure: a slow
consumer slows the reading, nothing piles up), and both keep the verdicts
they decided but had not handed over when cancelled: nothing fed is lost.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections import deque
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
        (backpressure); verdicts decided but not yet taken when the stream
        is cancelled or left come first from the next stream, or from
        :meth:`take_undelivered`.
        """
        pending = self._undelivered
        while pending:
            yield pending.popleft()
        async for item in items:
            pending.extend(self._feed_any(item, source))
            while pending:
                yield pending.popleft()
        if finish:
            pending.extend(self.finish())
            while pending:
                yield pending.popleft()

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
        over for the next stream (or :meth:`take_undelivered`)."""
        import anyio

        pending = self._undelivered
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

        async with anyio.create_task_group() as tg:
            if self._clocked:
                tg.start_soon(clock)
            try:
                await deliver([])
                async for item in items:
                    await deliver(self._feed_any(item, source))
                if finish:
                    await deliver(self.finish())
            except Exception as exc:
                failed.append(exc)
            tg.cancel_scope.cancel()
        if failed:
            raise failed[0]

    def take_undelivered(self) -> list[Verdict]:
        """The verdicts an async stream decided but had not handed over
        when it was cancelled or its consumer stopped early, oldest first
        (the next stream would hand them over first)."""
        out = list(self._undelivered)
        self._undelivered.clear()
        return out
