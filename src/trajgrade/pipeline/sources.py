"""Where verdicts come from: the input each trace was read from, and the
line of the event that decided a verdict.

:class:`InputSources` is the collaborator a file run gives its
:class:`~trajgrade.pipeline.grading.Grading`: it learns which input each
trace id is read from (only when there are several inputs: one input names
every trace), notes a trace id met again in a second input (the runner
warns once per id: such a trace is graded as one), and stamps each verdict
with a :class:`~trajgrade.verdicts.Source`. The engine lists the verdicts
it decided on an event together with that event (``deciders``); the event's
line is found in its batch only then, so a part without verdicts costs
nothing.

Memory is bounded: the input of the ``TRACES_MAX`` most recently seen trace
ids is remembered (a verdict of a trace forgotten names no file; an id met
again after that many others is not told).
"""

from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING, Final

import msgspec
from msgspec.structs import force_setattr

from trajgrade._util.bounded_ids import BoundedIds
from trajgrade.verdicts import Source

if TYPE_CHECKING:
    from collections.abc import Sequence

    from trajgrade.events import Event
    from trajgrade.pipeline.batches import Batch
    from trajgrade.verdicts import Verdict

__all__ = ("TRACES_MAX", "Duplicate", "InputSources")

#: Trace ids whose input is remembered, at most.
TRACES_MAX: Final = 65_536

_trace_id = attrgetter("trace_id")


class Duplicate(msgspec.Struct, frozen=True):
    """A trace id read from a second input."""

    trace_id: str
    first: str
    again: str


class InputSources:
    """Which input each trace came from; stamps verdicts with it."""

    def __init__(self, *, several: bool, named: bool = True) -> None:
        #: Trace id -> the input it was first read from (several inputs only).
        self._first: BoundedIds[str] | None = (
            BoundedIds(TRACES_MAX) if several else None
        )
        self._told: BoundedIds[bool] = BoundedIds(TRACES_MAX)
        #: The one input (or the last one named, before any trace was seen).
        self._only: str | None = None
        #: False: the inputs are no files (an OTLP receiver's requests).
        self._named = named
        #: Trace ids met in a second input since the runner last cleared this.
        self.duplicates: list[Duplicate] = []
        #: The engine's list of verdicts decided on an event, with the event
        #: (``Engine(deciders=...)``); drained by :meth:`stamp`.
        self.deciders: list[tuple[Verdict, Event]] = []

    def saw(self, source: str, default_trace: str, events: Sequence[Event]) -> None:
        """``events`` were decoded from ``source``."""
        if not self._named:
            return
        self._only = source
        first = self._first
        if first is None or not events:
            return
        ids = set(map(_trace_id, events))
        if "" in ids:  # events that name no trace belong to the input's own
            ids.discard("")
            ids.add(default_trace)
        for tid in ids:
            known = first.get(tid)
            if known is None:
                first.add(tid, source)
            elif known != source and tid not in self._told:
                self._told.add(tid, True)
                self.duplicates.append(Duplicate(tid, known, source))

    def file_of(self, trace_id: str) -> str | None:
        """The input ``trace_id`` was first read from, when known."""
        if self._first is None:
            return self._only
        return self._first.get(trace_id)

    def stamp(
        self, verdicts: list[Verdict], part: Sequence[Event], start: int, batch: Batch
    ) -> list[Verdict]:
        """``verdicts`` of ``part`` (``batch.events[start:]``) with their
        source: the trace's input and, for those decided on one of the part's
        events, its line."""
        lines: dict[int, int | None] = {}
        deciders = self.deciders
        if deciders:
            # The deciders come in the order of their events: each is looked
            # for (in C) from where the last one was found.
            i = 0
            for v, event in deciders:
                i = _index(part, event, i)
                if i >= 0:
                    lines[id(v)] = batch.line_of(start + i)
                else:
                    i = 0
            deciders.clear()
        for v in verdicts:
            self._stamped(v, lines.get(id(v)))
        return verdicts

    def sourced(self, verdicts: Sequence[Verdict]) -> Sequence[Verdict]:
        """``verdicts`` with the input of their trace where they have no
        source yet (those of a trace's end, a tick, an idle timeout)."""
        for v in verdicts:
            if v.source is None:
                self._stamped(v, None)
        return verdicts

    def _stamped(self, v: Verdict, line: int | None) -> Verdict:
        name = self.file_of(v.trace_id)
        if name is not None:
            # In place: the verdict is the engine's, fresh, not yet written
            # (a copy per verdict cost a few percent of a batch run).
            force_setattr(v, "source", Source(file=name, line=line))
        return v


def _index(part: Sequence[Event], event: Event, lo: int) -> int:
    """The position of ``event`` itself (not an equal one) in ``part`` from
    ``lo`` on, else from the start; -1 when it is not there."""
    for begin in (lo, 0) if lo else (0,):
        i = begin
        while True:
            try:
                i = part.index(event, i)
            except ValueError:
                break
            if part[i] is event:
                return i
            i += 1  # an equal event earlier (a line repeated): look on
    return -1
