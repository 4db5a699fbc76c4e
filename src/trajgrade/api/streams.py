"""The async side of :class:`trajgrade.api.stream_grader.StreamGrader`: live sources.

:class:`LiveStreams` is the grader's collaborator for them: it keeps the
streams running on one grader and the verdicts they decided but did not
hand over, and works on the grader through
:class:`~trajgrade.api.stream_host.StreamHost` alone. anyio is imported only
when :meth:`LiveStreams.grade_stream_to` runs, so ``import trajgrade`` stays
light. Both helpers pull one item at a time and hand its verdicts over
before reading the next (backpressure: a slow consumer slows the reading,
nothing piles up), and both keep the verdicts they decided but had not
handed over when cancelled, for ``take_undelivered``: nothing fed is lost.
"""

from __future__ import annotations

import inspect
from collections import deque
from typing import TYPE_CHECKING, Final

from trajgrade.api.checks import check_source

if TYPE_CHECKING:
    from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable

    from trajgrade.api.stream_host import Feedable, StreamHost
    from trajgrade.verdicts import Verdict

__all__ = ("LiveStreams", "Stream")

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


class LiveStreams:
    """The async streams running on one grader, and the verdicts they
    decided but had not handed over (``take_undelivered``).

    Each call names the grader it works on (``host``): this object holds no
    reference back to it.
    """

    __slots__ = ("_running", "_undelivered")

    def __init__(self) -> None:
        #: Verdicts an async stream decided but had not handed over when it
        #: was cancelled or left, oldest first.
        self._undelivered: deque[Verdict] = deque()
        #: The async streams running on the grader.
        self._running: list[Stream] = []

    async def grade_stream(
        self,
        host: StreamHost,
        items: AsyncIterable[Feedable],
        *,
        source: str | None,
        finish: bool,
    ) -> AsyncIterator[Verdict]:
        """:meth:`StreamGrader.grade_stream` on ``host``."""
        check_source(source)  # (before the first item is read)
        pending: deque[Verdict] = deque()
        stream = Stream(source)
        self._running.append(stream)
        try:
            async for item in items:
                pending.extend(self._fed(host, stream, item))
                while pending:
                    yield pending.popleft()
            if finish:
                pending.extend(self._finished(host, stream))
                while pending:
                    yield pending.popleft()
        finally:
            self._running.remove(stream)
            self._undelivered.extend(pending)

    async def grade_stream_to(
        self,
        host: StreamHost,
        items: AsyncIterable[Feedable],
        on_verdict: Callable[[Verdict], Awaitable[None] | None],
        *,
        source: str | None,
        finish: bool,
        tick_interval: float,
    ) -> None:
        """:meth:`StreamGrader.grade_stream_to` on ``host``."""
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
                    await deliver(host.tick())
            except Exception as exc:  # (raised below, alone)
                failed.append(exc)
                tg.cancel_scope.cancel()

        self._running.append(stream)
        try:
            async with anyio.create_task_group() as tg:
                if host._clocked:
                    tg.start_soon(clock)
                try:
                    async for item in items:
                        await deliver(self._fed(host, stream, item))
                    if finish:
                        await deliver(self._finished(host, stream))
                except Exception as exc:
                    failed.append(exc)
                tg.cancel_scope.cancel()
        finally:
            self._running.remove(stream)
            self._undelivered.extend(pending)
        if failed:
            raise failed[0]

    def take_undelivered(self) -> list[Verdict]:
        """The verdicts not handed over, oldest first; forgotten here."""
        out = list(self._undelivered)
        self._undelivered.clear()
        return out

    @staticmethod
    def _fed(host: StreamHost, stream: Stream, item: Feedable) -> list[Verdict]:
        """One item of ``stream``; the ids it remembers stay about as many
        as its traces still open."""
        out = host._feed_any(item, stream.source, stream.traces)
        if len(stream.traces) > stream.prune_at:
            stream.traces.intersection_update(host.engine.open_traces())
            stream.prune_at = max(_PRUNE_AT, 2 * len(stream.traces))
        return out

    def _finished(self, host: StreamHost, stream: Stream) -> list[Verdict]:
        """The end of ``stream``'s items: ``finish()`` when no other stream
        runs on the grader; else only what is this stream's alone (its
        traces and its source), so the others' traces stay open (finishing
        them dropped their later events: no verdict, no guard decision)."""
        others = [s for s in self._running if s is not stream]
        if not others:
            return host.finish()
        shared = set[str]().union(*(s.traces for s in others))
        alone = not any(s.source == stream.source for s in others)
        return host._end_stream(stream.source, stream.traces, shared, close=alone)
