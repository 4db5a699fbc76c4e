"""Decoded batches into one engine: verdicts, located errors and anomalies.

:class:`Grading` is what every runner (files, ``trajgrade run``, Kafka
partitions, ``StreamGrader``) feeds a source's decoded batches through: bad
records taint their traces, anomalies get the line of their event, and the
verdicts come back in parts of :data:`EMIT_EVENTS` events when the runner
writes as it goes (a chunk in which thousands of traces end does not hold
all their verdicts at once).
"""

from __future__ import annotations

from bisect import bisect_left
from typing import TYPE_CHECKING, Final

import msgspec

from trajgrade.errors import InputError, Location
from trajgrade.events import ToolCall, TraceStart

if TYPE_CHECKING:
    from collections.abc import Iterator

    from trajgrade.engine.engine import Anomaly, Engine
    from trajgrade.events import Event
    from trajgrade.pipeline.batches import Batch
    from trajgrade.pipeline.decoder import SourceDecoder
    from trajgrade.pipeline.sources import InputSources
    from trajgrade.verdicts import Verdict

__all__ = ("EMIT_EVENTS", "Grading")

#: Events a runner feeds the engine at a time (``Grading.feed_batches``).
EMIT_EVENTS: Final = 1024
#: Traces whose recorded cwd is remembered for their calls, at most.
ROOTS_MAX: Final = 65_536


class Grading:
    """Feeds decoded batches into one engine; reports what happened."""

    def __init__(
        self,
        engine: Engine,
        *,
        decisions_inline: bool = False,
        project_root: str | None = None,
        sources: InputSources | None = None,
    ) -> None:
        self.engine = engine
        #: Verdicts' sources, for a file run (its engine lists ``deciders``).
        self.sources = sources
        #: ``--project-root``: the directory of calls that name none.
        self.project_root = project_root
        #: Whether calls get a directory here: a policy that matches paths
        #: relative to the project (``project_path``), or ``--project-root``.
        self._rooting = project_root is not None or engine.suite.uses_project_path
        #: Trace -> the cwd its log recorded (``trace_start`` metadata).
        self._roots: dict[str, str] = {}
        #: :meth:`feed_batches`' parts. One event when guard decisions share
        #: the verdicts' stream (``decisions_inline``: ``--decisions -``), so
        #: that stream holds each event's verdicts, then its decisions,
        #: however the input was read (a whole file, a pipe line by line).
        self.part_events = 1 if decisions_inline else EMIT_EVENTS
        self.errors: list[InputError] = []
        self.anomalies: list[tuple[Anomaly, Location]] = []

    @property
    def problems(self) -> bool:
        """Whether there is anything to report: input errors, anomalies, a
        trace id met in a second input."""
        sources = self.sources
        return bool(self.errors or self.anomalies or (sources and sources.duplicates))

    def feed(
        self, decoder: SourceDecoder, batch: Batch, *, now: float | None = None
    ) -> list[Verdict]:
        """Feed one batch; bad records taint their traces; return verdicts."""
        parts = self.feed_batches(decoder, batch, now=now, events=len(batch.events))
        return [v for out in parts for v in out]

    def feed_batches(
        self,
        decoder: SourceDecoder,
        batch: Batch,
        *,
        now: float | None = None,
        events: int | None = None,
    ) -> Iterator[list[Verdict]]:
        """:meth:`feed` in parts of ``events`` events (default
        ``part_events``): a runner writes each part's verdicts before the next
        part is fed (a chunk in which thousands of traces end), the same
        verdicts in the same order."""
        engine, sources = self.engine, self.sources
        if sources is not None:
            sources.saw(decoder.source, decoder.default_trace, batch.events)
        self.errors += batch.errors
        rejects = _in_line_order(batch) if batch.errors else []
        todo = batch.events
        step = max(1, self.part_events if events is None else events)
        n, k, start = len(todo), 0, 0
        while True:
            # A bad record taints its trace where it stands among the events:
            # one after the trace's end changes nothing, however the input
            # was chunked (before, a batch's errors all came first).
            while k < len(rejects) and rejects[k][0] <= start:
                _, trace, reason = rejects[k]
                engine.reject(trace, reason)
                k += 1
            if start >= n:
                break
            end = min(start + step, n)
            if k < len(rejects):
                end = min(end, rejects[k][0])
            part = todo[start:end]
            if self._rooting:
                part = self._rooted(part, decoder.default_trace)
            out = engine.feed_many(part, now=now, default_trace=decoder.default_trace)
            if sources is not None and out:
                out = sources.stamp(out, part, start, batch)
            if engine.anomalies:
                # Rare: find each anomaly's event in the batch to name its line.
                position = {id(ev): start + i for i, ev in enumerate(part)}
                for a in engine.anomalies:
                    index = position.get(id(a.event), -1)
                    where = Location(file=decoder.source, line=batch.line_of(index))
                    self.anomalies.append((a, where))
                engine.anomalies.clear()
            yield out
            start = end

    def _rooted(self, events: list[Event], default_trace: str) -> list[Event]:
        """``events`` with a directory on each call that names none (the
        project root ``project_path`` matches against): ``--project-root``,
        else the cwd its trace's log recorded; a call's own cwd (a hook
        payload's) is kept."""
        roots = self._roots
        out: list[Event] | None = None
        for i, ev in enumerate(events):
            if isinstance(ev, TraceStart):
                cwd = (ev.metadata or {}).get("cwd")
                if isinstance(cwd, str) and cwd.startswith("/"):
                    if len(roots) >= ROOTS_MAX:
                        del roots[next(iter(roots))]
                    roots[ev.trace_id or default_trace] = cwd
            elif isinstance(ev, ToolCall) and ev.cwd is None:
                root = self.project_root or roots.get(ev.trace_id or default_trace)
                if root is not None:
                    if out is None:
                        out = list(events)
                    out[i] = _rooted_call(ev, root)
        return events if out is None else out


def _rooted_call(call: ToolCall, root: str) -> ToolCall:
    return msgspec.structs.replace(call, cwd=root)


def _in_line_order(batch: Batch) -> list[tuple[int, str, str]]:
    """(events before it, trace, reason) of each of the batch's errors that
    names a trace: how many of the batch's events come from lines before
    its own (an error without a line: before every event), in that order."""
    lines = [batch.line_of(i) for i in range(len(batch.events))]
    placed = []
    for err in batch.errors:
        if err.trace_id is None:
            continue
        line = err.location.line
        before = 0 if line is None else bisect_left(lines, line, key=_or_zero)
        placed.append((before, err.trace_id, str(err)))
    placed.sort(key=lambda p: p[0])  # (stable: same place, input order)
    return placed


def _or_zero(line: int | None) -> int:
    return 0 if line is None else line
