"""trajgrade in a Quix Streams application (``pip install 'trajgrade[quix]'``).

:class:`QuixGrader` is the function to put in
``sdf.apply(..., stateful=True, expand=True, metadata=True)``: for each
record it reads the trace's :class:`~trajgrade.api.trace_host.TraceHost`
snapshot from the record key's state (``state.get_bytes``), feeds the record
and writes the state back (``state.set_bytes``), so the state lives in Quix's
per-partition RocksDB store, its changelog topic and its checkpoints. It
returns the :class:`~trajgrade.api.trace_host.HostOutput`\\s the record decided;
:func:`grade` wires the whole pipeline::

    app = Application(broker_address=..., consumer_group="trajgrade")
    events = app.topic("agent-events", key_deserializer="str", value_deserializer="bytes")
    verdicts = app.topic("verdicts", key_serializer="str", value_serializer="bytes")
    grader = QuixGrader.from_policy("policy.yaml")
    grade(app.dataframe(events), grader, idle=timedelta(minutes=30)).to_topic(verdicts)
    app.run()

Records are keyed by trace id (the message key; ``group_by=True``
repartitions by :meth:`TraceHost.trace_id_of` when producers key otherwise).
A record's value is one event: a line of a supported format (bytes) or a
decoded mapping (a ``json`` deserializer). Output values are the JSON lines
``trajgrade grade`` prints, keyed by trace id, with headers ``trajgrade-id``
(stable: an at-least-once replay re-emits the same id) and ``trajgrade-kind``
(``verdict`` or ``decision``).

Ending traces: a ``trace_end`` event ends its trace. Quix has no per-key
timers, so idle traces are ended on **event time** by a session window over
the same records, closed per partition (``closing_strategy="partition"``):
a trace whose last record is ``idle`` older than the partition's newest
record is finished (:meth:`QuixGrader.finish_idle`). A partition that
receives nothing does not move on; a producer can move it with *tick*
records (key :data:`TICK_KEY`, any value, on every partition), which are not
graded. Closed traces keep a small marker (late records are dropped) that
expires ``closed_ttl`` after, in event time (Quix's state TTL).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final, Literal

from trajgrade.api.trace_host import HostOutput, TraceHost, TraceState

if TYPE_CHECKING:
    import os
    from collections.abc import Mapping

    from quixstreams.dataframe import StreamingDataFrame
    from quixstreams.state import State

__all__ = ("STATE_KEY", "TICK_KEY", "QuixGrader", "grade")

#: The state entry (under the record's key) holding the trace's snapshot.
STATE_KEY: Final = "trajgrade"
#: The message key of tick records: they move a partition's event time
#: (idle traces end), and are not graded. (A NUL prefix: never a trace id.)
TICK_KEY: Final = "\x00trajgrade-tick"


class QuixGrader:
    """A compiled policy as Quix Streams stateful functions."""

    def __init__(
        self,
        host: TraceHost,
        *,
        state_ttl: timedelta | None = None,
        closed_ttl: timedelta | None = timedelta(days=1),
    ) -> None:
        self.host = host
        #: Event-time expiry of an open trace's state (None: kept until it ends).
        self.state_ttl = state_ttl
        #: Event-time expiry of a closed trace's marker (None: kept).
        self.closed_ttl = closed_ttl
        #: Records without a key (not graded: key them, or ``group_by=True``).
        self.unkeyed = 0
        #: Records whose events name another trace than their key (dropped).
        self.misrouted = 0

    @classmethod
    def from_policy(
        cls,
        policy: str | os.PathLike[str],
        *,
        format: str = "auto",  # noqa: A002 (TraceHost's name)
        allow_code: bool = False,
        samples: Mapping[str, Any] | None = None,
        state_ttl: timedelta | None = None,
        closed_ttl: timedelta | None = timedelta(days=1),
    ) -> QuixGrader:
        """Compile a policy file or text (see :meth:`TraceHost.from_policy`)."""
        host = TraceHost.from_policy(
            policy, format=format, allow_code=allow_code, samples=samples
        )
        return cls(host, state_ttl=state_ttl, closed_ttl=closed_ttl)

    def key_of(self, value: Any) -> str:
        """The trace id a record names, for ``sdf.group_by`` (``""``: none)."""
        return self.host.trace_id_of(value) or ""

    def __call__(
        self,
        value: Any,
        key: Any,
        timestamp: int,
        headers: Any,
        state: State[str, bytes],
    ) -> list[HostOutput]:
        """Grade one record (``sdf.apply(..., stateful=True, expand=True,
        metadata=True)``): the verdicts and decisions it decided."""
        trace_id = _trace_of(key)
        if trace_id is None or trace_id == TICK_KEY:
            self.unkeyed += trace_id is None
            return []
        trace = self._load(state, trace_id)
        if trace.closed:  # (a late record: dropped, the marker kept as it is)
            return []
        try:
            out = self.host.feed(trace, value)
        except ValueError:  # events of another trace: the producer's keying
            self.misrouted += 1
            return []
        self._store(state, trace)
        return out

    def finish_idle(
        self,
        value: Any,
        key: Any,
        timestamp: int,
        headers: Any,
        state: State[str, bytes],
    ) -> list[HostOutput]:
        """End the trace of a closed session window (its idle timeout)."""
        trace_id = _trace_of(key)
        if not trace_id or trace_id == TICK_KEY:
            return []
        raw = state.get_bytes(STATE_KEY)
        if raw is None:
            return []
        trace = self.host.restore(raw)
        if trace.closed:
            return []
        out = self.host.finish(trace, reason="idle")
        self._store(state, trace)
        return out

    def _load(self, state: State[str, bytes], trace_id: str) -> TraceState:
        raw = state.get_bytes(STATE_KEY)
        return self.host.open(trace_id) if raw is None else self.host.restore(raw)

    def _store(self, state: State[str, bytes], trace: TraceState) -> None:
        ttl = self.closed_ttl if trace.closed else self.state_ttl
        state.set_bytes(STATE_KEY, self.host.snapshot(trace), ttl=ttl)


def grade(
    sdf: StreamingDataFrame,
    grader: QuixGrader,
    *,
    idle: timedelta | None = None,
    group_by: bool = False,
    values: Literal["bytes", "json"] = "bytes",
) -> StreamingDataFrame:
    """The pipeline: records in, output values (JSON bytes, keyed by trace
    id, with the ``trajgrade-id`` and ``trajgrade-kind`` headers) out.

    ``idle``: end a trace whose last record is that much older (event time)
    than its partition's newest one. ``group_by``: repartition by the trace
    id records name (producers did not key by it), through a topic whose
    values are ``values`` (the input's: raw lines, or decoded JSON).
    """
    if idle is not None and idle <= timedelta(0):
        msg = f"idle must be a positive timedelta, got {idle!r}"
        raise ValueError(msg)
    if group_by:
        sdf = sdf.group_by(
            grader.key_of,
            name="trajgrade-trace",
            key_serializer="str",
            key_deserializer="str",
            value_serializer=values,
            value_deserializer=values,
        )
    if idle is None:
        outputs = sdf.apply(grader, stateful=True, expand=True, metadata=True)
    else:
        # A session closes once the partition's event time passes its last
        # record + 2 gaps + grace: half the idle time is the gap. This branch
        # is made first, so it runs first for each record: a trace whose
        # idle time ran out before its next record is ended before that
        # record comes (dropped, late), as a runner's idle timeout would.
        sessions = sdf.session_window(idle / 2, name="trajgrade-idle")
        ends = sessions.agg(records=_count()).final(closing_strategy="partition")
        endings = ends.apply(
            grader.finish_idle, stateful=True, expand=True, metadata=True
        )
        graded = sdf.apply(grader, stateful=True, expand=True, metadata=True)
        outputs = endings.concat(graded)
    return outputs.set_headers(_headers).apply(HostOutput.to_json)


def _count() -> Any:
    from quixstreams.dataframe.windows.aggregations import Count

    return Count()


def _headers(
    value: HostOutput, key: Any, timestamp: int, headers: Any
) -> list[tuple[str, bytes]]:
    return [
        ("trajgrade-id", value.id.encode()),
        ("trajgrade-kind", value.kind.encode()),
    ]


def _trace_of(key: Any) -> str | None:
    if isinstance(key, bytes):
        return key.decode("utf-8", "replace") or None
    return key if isinstance(key, str) and key else None
