"""The engine's records: per-trace state, its plain-data form for
checkpoints, counters and anomalies.

:class:`TraceSnapshot` and :class:`EngineState` are what
:meth:`trajgrade.engine.engine.Engine.checkpoint` gives and ``load`` takes (see
:mod:`trajgrade.runner.store` for the file); ``_Trace`` is the live form the engine
feeds. Fields added later have defaults at the end of the (array-like)
structs, so older checkpoints still decode.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import msgspec

from trajgrade.verdicts import Decision, Outcome

if TYPE_CHECKING:
    from collections.abc import Sequence

    from trajgrade.engine.guard import AbortState
    from trajgrade.graders import Grader

__all__ = (
    "CLOSED_MEMORY",
    "NO_CALLS",
    "Anomaly",
    "EngineState",
    "EngineStats",
    "TraceSnapshot",
    "call_anomaly",
    "closing_decision",
    "unanswered",
)


class Anomaly(msgspec.Struct, frozen=True, kw_only=True):
    """Something odd but survivable about an event (logged by the runner)."""

    trace_id: str
    kind: str
    message: str
    #: The event it is about (its position in a batch gives its line); a
    #: tool result's ``result`` is None when no grader reads it
    #: (trajgrade.events).
    event: Any = None


def call_anomaly(trace_id: str, kind: str, cid: str, event: Any) -> Anomaly:
    """A reused call id (``duplicate_call_id``) or a result without its
    call (``orphan_result``)."""
    if kind == "duplicate_call_id":
        msg = f"call id {cid!r} is reused while the earlier call with that id has no result; results will pair with the later call"
    else:
        msg = f"tool_result for call id {cid!r} matches no open tool_call; it is ignored by graders that pair results to calls"
    return Anomaly(trace_id=trace_id, kind=kind, message=msg, event=event)


def unanswered(trace_id: str, ids: list[str]) -> Anomaly:
    """The calls a trace ended with, still without a result."""
    shown = ", ".join(repr(c) for c in ids[:5])
    more = f" (+{len(ids) - 5} more)" if len(ids) > 5 else ""
    msg = f"{len(ids)} tool call(s) never got a result: {shown}{more}"
    return Anomaly(trace_id=trace_id, kind="unanswered_calls", message=msg)


def closing_decision(
    d: Decision | None, tainted: str | None, *, sealed: bool
) -> Decision:
    """A grader's ``finish`` as the final decision of a trace that may have
    lost events (``tainted``: why)."""
    if d is None:  # a grader bug: finish must decide
        d = Decision(
            outcome=Outcome.ERROR,
            score=0.0,
            evidence="the grader gave no final decision; please report it",
        )
    if not d.final:
        d = msgspec.structs.replace(d, final=True)
    if tainted is not None and sealed:
        # A sealed outcome stands (it was fixed before anything else could
        # change it); only the score may miss the lost events.
        return msgspec.structs.replace(
            d, metadata={**d.metadata, "lost_events": tainted}
        )
    if tainted is not None:
        return Decision(
            outcome=Outcome.ERROR,
            score=0.0,
            evidence=f"events of this trace were lost ({tainted}); without them the grader would say {d.outcome}: {d.evidence}",
            metadata={**d.metadata, "would_be": str(d.outcome)},
        )
    return d


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
    """Everything an engine knows, as plain data (see :mod:`trajgrade.runner.store`).

    Restoring it into an engine compiled from the same suite and feeding the
    rest of the events gives exactly the verdicts of an uninterrupted run.
    """

    traces: list[TraceSnapshot]
    #: Recently closed trace ids, oldest first, with whether they ended
    #: explicitly: late events of these are dropped, not graded afresh.
    closed: list[tuple[str, bool]]
    #: Traces a rejected record named before any of their events arrived.
    unopened: dict[str, str]


#: How many closed trace ids are remembered to drop late events.
CLOSED_MEMORY: Final = 65_536

#: A trace's open call ids while it has none: shared, never written (the
#: engine gives a trace its own dict at its first call id; per-trace memory).
NO_CALLS: Final[dict[str, None]] = {}


class _Trace:
    __slots__ = (
        "abort",
        "calls",
        "events",
        "id",
        "last_ts",
        "live",
        "mark",
        "opened_at",
        "packed",
        "parked",
        "sealed",
        "seen_at",
        "states",
        "tainted",
        "ticked",
    )

    def __init__(
        self, trace_id: str, states: list[Any], opened_at: float | None
    ) -> None:
        self.id = trace_id
        self.states = states
        #: Bit i: grader i's outcome was reported (sealed); an int, not a
        #: list of bools (per-trace memory).
        self.sealed = 0
        self.live = len(states)
        self.events = 0
        self.opened_at = opened_at
        self.seen_at = opened_at
        self.last_ts: float | None = None
        self.tainted: str | None = None
        self.calls: dict[str, None] = NO_CALLS
        self.abort: AbortState | None = None
        #: States of graders that left this trace's routes (settled), by
        #: index; their slot in ``states`` is None meanwhile.
        self.parked: dict[int, Any] | None = None
        #: The grader states and open call ids, msgpack-packed while the
        #: trace is idle (trajgrade.engine.packing); ``states`` and ``calls`` are
        #: empty meanwhile.
        self.packed: bytes | None = None
        #: ``events`` at the last packing sweep (had it events since?).
        self.mark = 0
        #: The runner's clock of the latest tick its clock-driven graders
        #: were brought up to (trajgrade.engine.clock).
        self.ticked: float | None = None

    def park(self, i: int) -> None:
        """Grader ``i`` is settled: no routed event reaches it until
        ``unpark`` (``states[i]`` None skips it in the engine's loop)."""
        if self.parked is None:
            self.parked = {}
        self.parked[i] = self.states[i]
        self.states[i] = None

    def unpark(self) -> None:
        """Every settled grader back on the routes."""
        if self.parked:
            for i, st in self.parked.items():
                self.states[i] = st
        self.parked = None

    def snapshot(
        self, states: list[Any] | None = None, calls: list[str] | None = None
    ) -> TraceSnapshot:
        """This trace as plain data (grader states msgpack-encoded);
        ``states`` and ``calls``: a packed trace's, unpacked."""
        enc = msgspec.msgpack.encode
        states = list(self.states if states is None else states)
        for i, st in (self.parked or {}).items():
            states[i] = st
        return TraceSnapshot(
            trace_id=self.id,
            events=self.events,
            opened_at=self.opened_at,
            last_ts=self.last_ts,
            tainted=self.tainted,
            sealed=[bool(self.sealed >> i & 1) for i in range(len(states))],
            states=[None if st is None else enc(st) for st in states],
            open_calls=list(self.calls) if calls is None else calls,
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
        tr.sealed = sum(1 << i for i, b in enumerate(snap.sealed) if b)
        tr.live = sum(st is not None for st in states)
        tr.calls = dict.fromkeys(snap.open_calls)
        tr.seen_at = snap.seen_at
        if snap.abort is not None:
            i, rule, reason = snap.abort
            if not 0 <= i < len(graders):  # (the guard indexes graders by it)
                msg = f"trace {snap.trace_id!r}: its abort names grader {i} of {len(graders)}"
                raise ValueError(msg)
            tr.abort = (i, rule, reason)
        return tr
