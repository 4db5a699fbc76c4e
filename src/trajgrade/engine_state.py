"""The engine's records: per-trace state, its plain-data form for
checkpoints, counters and anomalies.

:class:`TraceSnapshot` and :class:`EngineState` are what
:meth:`trajgrade.engine.Engine.checkpoint` gives and ``load`` takes (see
:mod:`trajgrade.state` for the file); ``_Trace`` is the live form the engine
feeds. Fields added later have defaults at the end of the (array-like)
structs, so older checkpoints still decode.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:
    from collections.abc import Sequence

    from trajgrade.graders import Grader
    from trajgrade.guarding import AbortState

__all__ = ("Anomaly", "EngineState", "EngineStats", "TraceSnapshot")


class Anomaly(msgspec.Struct, frozen=True, kw_only=True):
    """Something odd but survivable about an event (logged by the runner)."""

    trace_id: str
    kind: str
    message: str
    #: The event it is about (its position in a batch gives its line).
    event: Any = None


class EngineStats(msgspec.Struct, frozen=True, kw_only=True):
    """Counters since the engine was created."""

    events: int
    open_traces: int
    closed_traces: int
    verdicts: int
    early_verdicts: int
    #: Dropped: events of a trace after its end (``trace_end``, end of
    #: input, idle timeout) ...
    late_events: int
    #: ... and of a trace whose every grader was final already.
    settled_events: int
    rejected_events: int


class TraceSnapshot(msgspec.Struct, kw_only=True, array_like=True):
    """One trace's whole state, as plain data (a checkpoint entry)."""

    trace_id: str
    events: int
    opened_at: float | None
    last_ts: float | None
    tainted: str | None
    sealed: list[bool]
    #: One msgpack-encoded grader state per grader; None once that grader is final.
    states: list[bytes | None]
    open_calls: list[str]
    #: Runner clock at the trace's last event (idle timeouts); None in batch.
    seen_at: float | None = None
    #: The guard's abort (grader index, rule, reason) once a grader whose
    #: action is ``abort`` failed; absent in checkpoints that predate it.
    abort: tuple[int, str, str] | None = None


class EngineState(msgspec.Struct, kw_only=True, array_like=True):
    """Everything an engine knows, as plain data (see :mod:`trajgrade.state`).

    Restoring it into an engine compiled from the same suite and feeding the
    rest of the events gives exactly the verdicts of an uninterrupted run.
    """

    traces: list[TraceSnapshot]
    #: Recently closed trace ids, oldest first, with whether they ended
    #: explicitly: late events of these are dropped, not graded afresh.
    closed: list[tuple[str, bool]]
    #: Traces a rejected record named before any of their events arrived.
    unopened: dict[str, str]


class _Trace:
    __slots__ = (
        "abort",
        "calls",
        "events",
        "id",
        "last_ts",
        "live",
        "opened_at",
        "sealed",
        "seen_at",
        "states",
        "tainted",
    )

    def __init__(
        self, trace_id: str, states: list[Any], opened_at: float | None
    ) -> None:
        self.id = trace_id
        self.states = states
        self.sealed = [False] * len(states)
        self.live = len(states)
        self.events = 0
        self.opened_at = opened_at
        self.seen_at = opened_at
        self.last_ts: float | None = None
        self.tainted: str | None = None
        self.calls: dict[str, None] = {}
        self.abort: AbortState | None = None

    def snapshot(self) -> TraceSnapshot:
        """This trace as plain data (grader states msgpack-encoded)."""
        enc = msgspec.msgpack.encode
        return TraceSnapshot(
            trace_id=self.id,
            events=self.events,
            opened_at=self.opened_at,
            last_ts=self.last_ts,
            tainted=self.tainted,
            sealed=list(self.sealed),
            states=[None if st is None else enc(st) for st in self.states],
            open_calls=list(self.calls),
            seen_at=self.seen_at,
            abort=self.abort,
        )

    @classmethod
    def restored(cls, snap: TraceSnapshot, graders: Sequence[Grader[Any]]) -> _Trace:
        """The live trace of a snapshot taken with the same graders."""
        states: list[Any] = [
            None if raw is None else msgspec.msgpack.decode(raw, type=g.state_type)
            for g, raw in zip(graders, snap.states, strict=True)
        ]
        tr = cls(snap.trace_id, states, snap.opened_at)
        tr.events = snap.events
        tr.last_ts = snap.last_ts
        tr.tainted = snap.tainted
        tr.sealed = list(snap.sealed)
        tr.live = sum(st is not None for st in states)
        tr.calls = dict.fromkeys(snap.open_calls)
        tr.seen_at = snap.seen_at
        if snap.abort is not None:
            i, rule, reason = snap.abort
            tr.abort = (i, rule, reason)
        return tr
