"""Which dataset rows found their trace, and which traces found no row.

The engine's :class:`DatasetRows` collaborator. A row reaches a trace only when
its key equals the trace id (as text); a ``--dataset-key`` or a trace id
template that does not fit makes every row miss, and the graders that need a
row then give ``error`` verdicts with nothing else said. The engine counts
what matched, so the edge can warn once at the end. The count never changes
a verdict. Memory: at most one id per dataset row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from trajgrade.events import TraceStart

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = ("DatasetMatch", "DatasetRows")

#: (a row may be None: the engine's caller gives any mapping of rows)
NO_ROW: Any = object()


class DatasetMatch(msgspec.Struct, frozen=True, kw_only=True):
    """How a dataset's rows and a run's traces met."""

    #: Rows in the dataset.
    rows: int
    #: Distinct rows given to a trace (restored traces included).
    rows_matched: int
    #: Traces opened with a row / without one.
    traces_with_row: int
    traces_without_row: int
    #: The first trace opened without a row, to show what ids look like.
    example_trace: str | None = None

    @property
    def rows_unmatched(self) -> int:
        return self.rows - self.rows_matched

    def merged(self, other: DatasetMatch) -> DatasetMatch:
        """Two engines' counts on one dataset (Kafka's partitions: a trace
        lives on one, so their matched rows do not overlap)."""
        return DatasetMatch(
            rows=self.rows,
            rows_matched=min(self.rows, self.rows_matched + other.rows_matched),
            traces_with_row=self.traces_with_row + other.traces_with_row,
            traces_without_row=self.traces_without_row + other.traces_without_row,
            example_trace=self.example_trace or other.example_trace,
        )


class DatasetRows:
    """A dataset's rows by trace id, and how they met the traces (counted)."""

    def __init__(self, samples: Mapping[str, Any] | None) -> None:
        #: Rows by trace id; None: the engine has no dataset.
        self._samples = samples
        self._rows_matched: set[str] = set()
        self._n_with_row = 0
        self._n_without_row = 0
        self._example_trace: str | None = None

    def start_event(self, trace_id: str) -> TraceStart | None:
        """What a newly opened trace's graders get of its row: a
        ``trace_start`` with ``metadata["sample"]``; None without a row.
        Counted either way."""
        samples = self._samples
        if samples is None:
            return None
        row = samples.get(trace_id, NO_ROW)
        if row is NO_ROW:
            self._n_without_row += 1
            if self._example_trace is None:
                self._example_trace = trace_id
            return None
        self._rows_matched.add(trace_id)
        self._n_with_row += 1
        return TraceStart(trace_id=trace_id, metadata={"sample": row})

    def seen(self, trace_ids: Iterable[str]) -> None:
        """Traces a checkpoint brings back: their rows found them before."""
        if self._samples is not None:
            self._rows_matched.update(t for t in trace_ids if t in self._samples)

    def match(self) -> DatasetMatch | None:
        """The counts so far; None without a dataset."""
        if self._samples is None:
            return None
        return DatasetMatch(
            rows=len(self._samples),
            rows_matched=len(self._rows_matched),
            traces_with_row=self._n_with_row,
            traces_without_row=self._n_without_row,
            example_trace=self._example_trace,
        )
