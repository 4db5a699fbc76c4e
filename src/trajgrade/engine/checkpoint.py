"""The engine's state as plain data: snapshots, checkpoints, restores.

A mixin of :class:`trajgrade.engine.engine.Engine` (kept apart so the feeding loop
reads on its own). A packed idle trace (:mod:`trajgrade.engine.packing`) is
unpacked for its snapshot only: a checkpoint does not bring every idle
trace's objects back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trajgrade.engine.state import EngineState, TraceSnapshot, _Trace

if TYPE_CHECKING:
    from collections import OrderedDict
    from collections.abc import Iterable, Sequence

    from trajgrade._util.bounded_ids import BoundedIds
    from trajgrade.engine.packing import Packer
    from trajgrade.graders import Grader

__all__ = ("Checkpoints",)


class Checkpoints:
    """Snapshot, checkpoint, restore and load for the engine."""

    # The engine's own fields these methods use.
    _graders: Sequence[Grader[Any]]
    _traces: dict[str, _Trace]
    _closed: BoundedIds[bool]
    _unopened: BoundedIds[str]
    _kept: OrderedDict[str, None]
    _packer: Packer | None

    if TYPE_CHECKING:  # (declared only: the clock mixin's)

        def _schedule(self, tr: _Trace, now: float | None = None) -> None: ...
        def _catch_up(self, tr: _Trace) -> list[Any]: ...
        def _caught_up(self, tr: _Trace, states: list[Any]) -> list[Any]: ...
        def _remember_unopened(self, trace_id: str, reason: str) -> None: ...
        def _rows_seen(self, trace_ids: Iterable[str]) -> None: ...

    def snapshot_trace(self, trace_id: str) -> TraceSnapshot | None:
        """One open trace's state as plain data."""
        tr = self._traces.get(trace_id)
        return None if tr is None else self._snapshot(tr)

    def snapshot(self) -> list[TraceSnapshot]:
        """Every open trace's state (see :mod:`trajgrade.runner.store` for the file form)."""
        return [self._snapshot(tr) for tr in self._traces.values()]

    def restore(self, snapshots: Iterable[TraceSnapshot]) -> None:
        """Load trace states taken by ``snapshot`` from an engine with the same suite."""
        for snap in snapshots:
            tr = _Trace.restored(snap, self._graders)
            # (A trace open already is replaced in place: its place in the
            # open order, which ``finish`` closes by, stays.)
            self._uncount(self._traces.get(snap.trace_id))
            self._traces[snap.trace_id] = tr
            if tr.live == 0:
                self._kept[tr.id] = None
            self._schedule(tr)
            self._closed.pop(snap.trace_id)
            self._unopened.pop(snap.trace_id)

    def checkpoint(self) -> EngineState:
        """The whole engine state: open traces, closed ids, pending taints."""
        return EngineState(
            traces=self.snapshot(),
            closed=self._closed.items(),
            unopened=dict(self._unopened.items()),
        )

    def load(self, state: EngineState) -> None:
        """Restore a :meth:`checkpoint` (from an engine with the same suite)."""
        for tid, ended in state.closed:
            # (past the bound the oldest is let go, as in a live run)
            self._closed.add(tid, ended)
            self._uncount(self._traces.pop(tid, None))
        for tid, reason in state.unopened.items():
            self._remember_unopened(tid, reason)
        self.restore(state.traces)
        # (their dataset rows found them in the run that wrote the checkpoint)
        self._rows_seen(tid for tid, _ in state.closed)
        self._rows_seen(snap.trace_id for snap in state.traces)

    def _snapshot(self, tr: _Trace) -> TraceSnapshot:
        # Up to the latest tick, as ticking every trace would have it (by
        # the deadlines' promise this decides nothing); a packed trace from
        # a decoded copy, so a checkpoint does not unpack it.
        if tr.packed is None or self._packer is None:
            self._catch_up(tr)
            return tr.snapshot()
        states, calls = self._packer.unpacked(tr)
        return tr.snapshot(self._caught_up(tr, states), calls)

    def _uncount(self, gone: _Trace | None) -> None:
        """A trace a checkpoint replaced or closed: no longer a packed one."""
        if gone is not None and self._packer is not None:
            self._packer.forget(gone)
