"""Decoded batches into one engine: verdicts, located errors and anomalies.

:class:`Grading` is what every runner (files, ``trajgrade run``, Kafka
partitions, ``StreamGrader``) feeds a source's decoded batches through: bad
records taint their traces, anomalies get the line of their event, and the
verdicts come back in parts of :data:`EMIT_EVENTS` events when the runner
writes as it goes (a chunk in which thousands of traces end does not hold
all their verdicts at once).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from trajgrade.errors import InputError, Location

if TYPE_CHECKING:
    from collections.abc import Iterator

    from trajgrade.batches import Batch
    from trajgrade.engine import Anomaly, Engine
    from trajgrade.pipeline import SourceDecoder
    from trajgrade.verdicts import Verdict

__all__ = ("EMIT_EVENTS", "Grading")

#: Events a runner feeds the engine at a time (``Grading.feed_batches``).
EMIT_EVENTS: Final = 1024


class Grading:
    """Feeds decoded batches into one engine; reports what happened."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.errors: list[InputError] = []
        self.anomalies: list[tuple[Anomaly, Location]] = []

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
        events: int = EMIT_EVENTS,
    ) -> Iterator[list[Verdict]]:
        """:meth:`feed` in parts of ``events`` events: a runner writes each
        part's verdicts before the next part is fed (a chunk in which
        thousands of traces end), the same verdicts in the same order."""
        engine = self.engine
        for err in batch.errors:
            self.errors.append(err)
            if err.trace_id is not None:
                engine.reject(err.trace_id, str(err))
        todo, step = batch.events, max(1, events)
        for start in range(0, len(todo), step):
            part = todo[start : start + step]
            out = engine.feed_many(part, now=now, default_trace=decoder.default_trace)
            if engine.anomalies:
                # Rare: find each anomaly's event in the batch to name its line.
                position = {id(ev): start + i for i, ev in enumerate(part)}
                for a in engine.anomalies:
                    index = position.get(id(a.event), -1)
                    where = Location(file=decoder.source, line=batch.line_of(index))
                    self.anomalies.append((a, where))
                engine.anomalies.clear()
            yield out
