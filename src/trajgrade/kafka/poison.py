"""Records the Kafka client itself cannot decode, skipped like any bad record.

aiokafka decodes a record's headers as it hands the record out, and checks
each batch's CRC: a header key that is not UTF-8 (Kafka does not check it;
a hostile or broken producer can write one) or a corrupt batch raises from
``getmany``. Left alone, that ended the run with a traceback, and every
restart met the same record again: the partition, and the group's progress
on it, stalled for good. Worse, records of other partitions that the same
``getmany`` had already taken were dropped with the error while their
positions had moved past them: lost without a trace.

:func:`skip_undecodable` repairs both: every assigned partition is put back
at the grader's own position (the next record it has not graded), and the
partitions are read again one record at a time with the run's group-less
consumer, which finds the offset that raises. The records before it are
handed to the grader, the record is reported as ``input_rejected`` (it
cannot name its trace: its key is unread) and skipped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from trajgrade.kafka.run_state import _RunState

__all__ = ("decode_errors", "skip_undecodable")

#: Longest a probe waits for the next record of a partition.
PROBE_MS: Final = 1000


def decode_errors() -> tuple[type[Exception], ...]:
    """What ``getmany`` raises for a record it cannot decode."""
    from aiokafka.errors import CorruptRecordException

    return (UnicodeDecodeError, CorruptRecordException)


async def skip_undecodable(
    run: _RunState, error: BaseException, max_records: int
) -> dict[Any, list[Any]]:
    """After ``getmany`` raised ``error``: the records to grade instead (the
    good ones before each undecodable record); the consumer is placed after
    the undecodable records, and at the grader's position everywhere else."""
    from aiokafka.structs import TopicPartition

    consumer, probe = run.consumer, run.restorer
    out: dict[Any, list[Any]] = {}
    found = False
    async with run.lock:
        for p, worker in sorted(run.workers.items()):
            tp = TopicPartition(run.topic, p)
            start = worker.position
            if start is None:
                start = (await consumer.beginning_offsets([tp]))[tp]
            good, bad = await _probe(probe, tp, start, max_records)
            if bad is None:
                consumer.seek(tp, start)  # (records it took and dropped)
                continue
            found = True
            if good:
                out[tp] = good
            consumer.seek(tp, bad + 1)
            run.rejected(
                p,
                bad,
                None,
                f"the Kafka client cannot decode this record ({error!r}: a header key that is not UTF-8, or a corrupt batch); skipped, its trace cannot be named",
            )
    if not found:
        raise error  # (not a record of ours: the run cannot go on)
    return out


async def _probe(
    probe: Any, tp: Any, start: int, max_records: int
) -> tuple[list[Any], int | None]:
    """The records of ``tp`` from ``start`` before the first one that
    raises, and its offset; ``([], None)`` when one fetch's worth decodes."""
    errors = decode_errors()
    probe.assign([tp])
    probe.seek(tp, start)
    good: list[Any] = []
    try:
        try:
            await probe.getmany(tp, timeout_ms=PROBE_MS, max_records=max_records)
        except errors:
            probe.seek(tp, start)  # somewhere in there: one record at a time
        else:
            return [], None
        while len(good) < max_records:
            try:
                got = await probe.getmany(tp, timeout_ms=PROBE_MS, max_records=1)
            except errors:
                return good, await probe.position(tp)
            if not got:
                break
            good.extend(got[tp])
        return good, None
    finally:
        probe.assign([])
