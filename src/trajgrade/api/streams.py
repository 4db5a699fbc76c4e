"""The async side of :class:`trajgrade.api.stream_grader.StreamGrader`: live sources.

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
from typing import TYPE_CHECKING, Final

from trajgrade.api.checks import check_source

if TYPE_CHECKING:
    from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable

    from trajgrade.api.stream_grader import Feedable
    from trajgrade.engine.engine import Engine
    from trajgrade.verdicts import Verdict

__all__ = ("AsyncStreams", "Stream")

#: Trace ids a stream remembers before it lets go of those no longer open.
_PRUNE_AT: Final = 1024


class Stream:
    """One running async stream: its source, and the traces its items fed
    (ended at its end, when other streams still run on the grader)."""

    __slots__ = ("prune_at", "source", "traces")

    def __init__(self, source: str | None) -> None:
        self.source = source
        self.traces: set[str] = set()
        self.prune_at = _PRUNE_AT


class AsyncStreams:
    """``grade_stream``, ``grade_stream_to`` and ``take_undelivered``."""

    _clocked: bool
    #: Verdicts an async stream decided but had not handed over when it was
    #: cancelled or left, oldest first.
    _undelivered: deque[Verdict]
    #: The async streams running on this grader.
    _streams: list[Stream]

    if TYPE_CHECKING:  # (declared only: StreamGrader's)
        engine: Engine

        def finish(self) -> list[Verdict]: ...
        def tick(self, now: float | None = None) -> list[Verdict]: ...
        def _feed_any(
            self, item: Feedable, source: str | None, traces: set[str]
        ) -> list[Verdict]: ...
        def _end_stream(
            self, source: str | None, traces: set[str], keep: set[str], *, close: bool
        ) -> list[Verdict]: ...

    def _fed(self, stream: Stream, item: Feedable) -> list[Verdict]:
        """One item of ``stream``; the ids it remembers stay about as many
        as its traces still open."""
        out = self._feed_any(item, stream.source, stream.traces)
        if len(stream.traces) > stream.prune_at:
            stream.traces.intersection_update(self.engine.open_traces())
            stream.prune_at = max(_PRUNE_AT, 2 * len(stream.traces))
        return out

    def _finished(self, stream: Stream) -> list[Verdict]:
        """The end of ``stream``'s items: :meth:`finish` when no other stream
        runs on this grader; else only what is this stream's alone (its
        traces and its source), so the others' traces stay open (finishing
        them dropped their later events: no verdict, no guard decision)."""
        others = [s for s in self._streams if s is not stream]
        if not others:
            return self.finish()
        shared = set[str]().union(*(s.traces for s in others))
        alone = not any(s.source == stream.source for s in others)
        return self._end_stream(stream.source, stream.traces, shared, close=alone)

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
        (unless ``finish=False``); while other streams run on this grader,
        only the traces this stream's items fed (and no other stream's) are
        ended, and the last stream to end finishes the rest. Wall-time budgets are checked at each item;
        use :meth:`grade_stream_to` to have them fire between items too.
        The next item is read only when the last verdict was taken
        (backpressure). Verdicts decided but not yet taken when the stream
        is cancelled or left are kept for :meth:`take_undelivered` once the
        stream is closed (``contextlib.aclosing``, or when it is collected).
        Several streams may run at once on one grader (one per source):
        each yields only the verdicts of its own items.
        """
        check_source(source)  # (before the first item is read)
        pending: deque[Verdict] = deque()
        stream = Stream(source)
        self._streams.append(stream)
        try:
            async for item in items:
                pending.extend(self._fed(stream, item))
                while pending:
                    yield pending.popleft()
            if finish:
                pending.extend(self._finished(stream))
                while pending:
                    yield pending.popleft()
        finally:
            self._streams.remove(stream)
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
        source; wall-time budgets fire on the clock between items. Its
        end finishes traces as :meth:`grade_stream`'s does. An
        exception of ``items`` or ``on_verdict`` is raised as it is (not in
        an exception group); cancelled, it keeps the verdicts not yet handed
        over for :meth:`take_undelivered`."""
        import anyio

        check_source(source)
        if not tick_interval > 0:  # (0 would spin the clock: a busy loop)
            msg = f"tick_interval must be a positive number of seconds, got {tick_interval!r}"
            raise ValueError(msg)
        pending: deque[Verdict] = deque()
        failed: list[Exception] = []
        stream = Stream(source)

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

        self._streams.append(stream)
        try:
            async with anyio.create_task_group() as tg:
                if self._clocked:
                    tg.start_soon(clock)
                try:
                    async for item in items:
                        await deliver(self._fed(stream, item))
                    if finish:
                        await deliver(self._finished(stream))
                except Exception as exc:
                    failed.append(exc)
                tg.cancel_scope.cancel()
        finally:
            self._streams.remove(stream)
            self._undelivered.extend(pending)
        if failed:
            raise failed[0]

    def take_undelivered(self) -> list[Verdict]:
        """The verdicts async streams decided but had not handed over when
        they were cancelled or their consumer stopped early, oldest first."""
        out = list(self._undelivered)
        self._undelivered.clear()
        return out
