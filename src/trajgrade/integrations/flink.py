"""trajgrade in an Apache Flink job (``pip install 'trajgrade[flink]'``, Java 11/17).

:class:`FlinkGrader` is a PyFlink ``KeyedProcessFunction`` compiled from a
policy: the stream is keyed by trace id (:class:`TraceKey`), each trace's
:class:`~trajgrade.api.trace_host.TraceHost` snapshot lives in a byte-array
``ValueState`` (so in Flink's state backend, its checkpoints and savepoints,
and it moves when the job is rescaled from a savepoint), and idle traces are
ended by **event-time timers**: each record moves the trace's deadline to its
timestamp + ``idle`` (``on_timer`` finishes the trace once the watermark
passes it). A record without a timestamp sets the deadline to the end of
input, which a bounded source's final watermark reaches. :func:`grade` wires
it::

    env = StreamExecutionEnvironment.get_execution_environment()
    lines = env.from_source(source, WatermarkStrategy.no_watermarks(), "events")
    verdicts = grade(lines, "policy.yaml", idle=timedelta(minutes=30))
    # (trace_id, id, JSON): the lines ``trajgrade grade`` prints

A record is one event: a line of a supported format (``str`` or ``bytes``).
Outputs are ``(trace_id, id, json)`` tuples: verdicts and guard decisions
as ``trajgrade grade`` (``--decisions``) prints them, and their ids, stable
across replays, so the duplicates an at-least-once sink writes after a
restore can be dropped by id. A closed trace keeps its small snapshot (late records are dropped);
give the job a state TTL to expire those.

pyflink has no type hints: this module is the typed seam, and its
``type: ignore`` comments are where pyflink's untyped classes are subclassed.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import msgspec
from pyflink.common import Duration, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import KeyedProcessFunction, KeySelector
from pyflink.datastream.state import ValueStateDescriptor

from trajgrade.api.trace_host import HostOutput, TraceHost, TraceState

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyflink.datastream import DataStream, RuntimeContext

__all__ = ("OUTPUT_TYPE", "FlinkGrader", "TraceKey", "event_time", "grade")

#: The outputs' type: ``(trace_id, id, json)``.
OUTPUT_TYPE: Final = Types.TUPLE([Types.STRING(), Types.STRING(), Types.STRING()])
#: The deadline of a trace whose records carry no timestamp: the end of input
#: (a bounded source's last watermark is Long.MAX_VALUE).
END_OF_INPUT: Final = 2**63 - 1
#: Below this a record's timestamp is Flink's "none" (Long.MIN_VALUE).
_NO_TIMESTAMP: Final = -(2**62)
#: An output: ``(trace_id, id, json)``; ``id`` is stable across replays.
Output = tuple[str, str, str]
_STATE: Final = "trajgrade"
_CANONICAL: Final = object()  # (grade()'s default timestamps: event_time())
#: The stored deadline of a trace that has none (it ended).
_NO_DEADLINE: Final = -(2**63)


class _Timed(msgspec.Struct):
    """A canonical event's time (seconds; msgspec skips the rest unread)."""

    ts: float | None = None


_TIMED: Final = msgspec.json.Decoder(_Timed)


def _line(value: Any) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


def _compile(policy: str, allow_code: bool, format: str) -> TraceHost:  # noqa: A002
    return TraceHost.from_policy(policy, allow_code=allow_code, format=format)


class TraceKey(KeySelector):  # type: ignore[misc]  # (pyflink is untyped)
    """``key_by`` a record's trace id (``""`` when it names none: not graded)."""

    def __init__(
        self,
        policy: str,
        *,
        allow_code: bool = False,
        format: str = "auto",  # noqa: A002
    ) -> None:
        self._args = (policy, allow_code, format)
        self._host: TraceHost | None = None

    def get_key(self, value: Any) -> str:
        if self._host is None:  # (compiled on the worker, not pickled)
            self._host = _compile(*self._args)
        return self._host.trace_id_of(_line(value)) or ""

    def __getstate__(self) -> dict[str, Any]:
        return {"_args": self._args, "_host": None}


class _EventTime(TimestampAssigner):  # type: ignore[misc]
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        try:
            ts = _TIMED.decode(_line(value)).ts
        except msgspec.DecodeError:  # (not a canonical event: no time of its own)
            return record_timestamp
        return record_timestamp if ts is None else int(ts * 1000)


def event_time(out_of_order: timedelta = timedelta(seconds=5)) -> Any:
    """A ``WatermarkStrategy`` whose event time is a canonical event's ``ts``
    (what ``trajgrade convert`` writes): records ``out_of_order`` late at most."""
    ms = int(out_of_order.total_seconds() * 1000)
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(ms))
    return strategy.with_timestamp_assigner(_EventTime())


class FlinkGrader(KeyedProcessFunction):  # type: ignore[misc]
    """A policy's graders over a stream keyed by trace id (:class:`TraceKey`)."""

    def __init__(
        self,
        policy: str | os.PathLike[str],
        *,
        idle: timedelta = timedelta(minutes=30),
        allow_code: bool = False,
        format: str = "auto",  # noqa: A002 (TraceHost's name)
    ) -> None:
        if idle <= timedelta(0):
            msg = f"idle must be a positive timedelta, got {idle!r}"
            raise ValueError(msg)
        self.policy = os.fspath(policy)
        self.idle_ms = int(idle.total_seconds() * 1000)
        self.allow_code = allow_code
        self.format = format
        _compile(self.policy, allow_code, format)  # (its errors here, at job build)
        self._host: TraceHost | None = None
        self._state: Any = None

    def __getstate__(self) -> dict[str, Any]:
        # Shipped to the workers as the policy's name: each compiles it in open().
        return {**self.__dict__, "_host": None, "_state": None}

    def open(self, runtime_context: RuntimeContext) -> None:
        self._host = _compile(self.policy, self.allow_code, self.format)
        # One value per trace, its deadline and snapshot together: one state
        # read and one write per record, and nothing for a cache to hold
        # apart (two states per key, read back through a one-entry state
        # cache, lost an early verdict after a restore). PICKLED_BYTE_ARRAY,
        # not PRIMITIVE_ARRAY(BYTE): read back from the state backend, the
        # latter lost states.
        snapshot = ValueStateDescriptor(_STATE, Types.PICKLED_BYTE_ARRAY())
        self._state = runtime_context.get_state(snapshot)

    def process_element(self, value: Any, ctx: Any) -> Iterator[Output]:
        trace_id: str = ctx.get_current_key()
        if not trace_id:
            return
        host = self._live_host()
        stored = _Stored.read(self._state.value())
        if stored is None:
            trace, deadline = host.open(trace_id), None
        else:
            trace, deadline = host.restore(stored.snapshot), stored.deadline
        if trace.closed:  # (a late record: dropped, the closed snapshot kept)
            return
        ts = _timestamp(ctx)
        if ts is not None and deadline is not None and ts > deadline:
            # Idle before this record came, though no watermark said so yet
            # (watermarks are periodic): ended as the timer would have, and
            # the record dropped as late, whatever the watermarks' timing.
            ctx.timer_service().delete_event_time_timer(deadline)
            yield from self._end(trace, "idle")
            return
        outputs = host.feed(trace, _line(value))
        # (Ended by its own last event: its timer finds no deadline.)
        deadline = None if trace.closed else self._move_deadline(ctx, ts, deadline)
        self._state.update(_Stored(deadline, host.snapshot(trace)).write())
        yield from _outputs(outputs)

    def on_timer(self, timestamp: int, ctx: Any) -> Iterator[Output]:
        stored = _Stored.read(self._state.value())
        if stored is None or stored.deadline != timestamp:
            return  # (a deadline since moved on, or the trace ended)
        trace = self._live_host().restore(stored.snapshot)
        if not trace.closed:
            yield from self._end(trace, "end" if timestamp == END_OF_INPUT else "idle")

    def _end(self, trace: TraceState, reason: str) -> Iterator[Output]:
        host = self._live_host()
        outputs = host.finish(trace, reason=reason)
        self._state.update(_Stored(None, host.snapshot(trace)).write())
        yield from _outputs(outputs)

    def _live_host(self) -> TraceHost:
        if self._host is None:
            msg = "FlinkGrader used before open()"
            raise RuntimeError(msg)
        return self._host

    def _move_deadline(self, ctx: Any, ts: int | None, before: int | None) -> int:
        deadline = END_OF_INPUT
        if ts is not None:
            deadline = min(END_OF_INPUT - 1, ts + self.idle_ms)
        if before != deadline:
            timers = ctx.timer_service()
            if before is not None:
                timers.delete_event_time_timer(before)
            timers.register_event_time_timer(deadline)
        return deadline


class _Stored(NamedTuple):
    """A trace's value in the ``ValueState``: its idle deadline (ms of event
    time; None once ended) and its :class:`TraceHost` snapshot, as bytes:
    an 8-byte signed deadline (:data:`_NO_DEADLINE` for none), then the
    snapshot."""

    deadline: int | None
    snapshot: bytes

    @classmethod
    def read(cls, raw: Any) -> _Stored | None:
        if raw is None:
            return None
        data = bytes(raw)
        deadline = int.from_bytes(data[:8], "big", signed=True)
        return cls(None if deadline == _NO_DEADLINE else deadline, data[8:])

    def write(self) -> bytes:
        deadline = _NO_DEADLINE if self.deadline is None else self.deadline
        return deadline.to_bytes(8, "big", signed=True) + self.snapshot


def _timestamp(ctx: Any) -> int | None:
    """The record's event time in ms (None: it has none)."""
    ts = ctx.timestamp()
    return ts if ts is not None and ts > _NO_TIMESTAMP else None


def _outputs(outputs: list[HostOutput]) -> Iterator[Output]:
    for out in outputs:
        yield out.trace_id, out.id, out.to_json().decode()


def grade(
    records: DataStream,
    policy: str | os.PathLike[str],
    *,
    idle: timedelta = timedelta(minutes=30),
    timestamps: Any = _CANONICAL,
    allow_code: bool = False,
    format: str = "auto",  # noqa: A002
) -> DataStream:
    """Key ``records`` by trace id and grade them: ``(trace_id, id, json)`` out.

    ``timestamps``: the ``WatermarkStrategy`` giving records their event
    time (by default :func:`event_time`: a canonical event's ``ts``, else the
    record's own, e.g. Kafka's), or None when the stream has it already.
    """
    grader = FlinkGrader(policy, idle=idle, allow_code=allow_code, format=format)
    if timestamps is _CANONICAL:
        timestamps = event_time()
    if timestamps is not None:
        # (Here, not in from_source: PyFlink drops a Python timestamp
        # assigner given to from_source.)
        records = records.assign_timestamps_and_watermarks(timestamps)
    key = TraceKey(grader.policy, allow_code=allow_code, format=format)
    keyed = records.key_by(key, key_type=Types.STRING())
    return keyed.process(grader, output_type=OUTPUT_TYPE).name("trajgrade")
