"""``--repartition``: re-key a topic by trace id before grading it.

Grading needs every event of a trace on one partition (one engine sees the
whole trace). A topic whose producers do not key by trace id breaks that, so
this stage, like a Kafka Streams repartition, reads the input topic in its
own consumer group (``<group>-repartitioner``) and writes each record
unchanged to ``<group>-<topic>-repartition`` keyed by its trace: the
record's ``"trace_id"`` field when it has one, else its key, else the name of
its source partition (the trace the file-style default would give it).
Grading then consumes the repartition topic.

Delivery: input offsets are committed only after the re-keyed records are
acknowledged (at-least-once). A record copied twice after a crash is a
duplicate event for the grader; it is harmless for graders that count
distinct things and for the crash-free path, and documented in
``deploy/README.md``. Order is kept per source partition; a trace spread over
several source partitions is ordered as the records reach this stage
(Kafka has no order across partitions to recover).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from trajgrade.formats import sniff_trace_id
from trajgrade.kafka.options import group_settings
from trajgrade.kafka.sink import CLOSE_TIMEOUT, acked

if TYPE_CHECKING:
    from trajgrade.kafka.options import KafkaOptions

__all__ = ("Repartitioner", "repartition_key")


def repartition_key(value: bytes | None, key: bytes | None, source: str) -> bytes:
    """The trace key of a record: its trace_id field, its key, or its source."""
    if value:
        tid = sniff_trace_id(value)
        if tid is not None:
            return tid.encode()
    if key:
        return bytes(key)
    return source.encode()


def _too_large(exc: BaseException) -> bool:
    from aiokafka.errors import MessageSizeTooLargeError, RecordTooLargeError

    return isinstance(exc, (MessageSizeTooLargeError, RecordTooLargeError))


class Repartitioner:
    """Copies the input topic into the repartition topic, keyed by trace."""

    def __init__(self, opts: KafkaOptions, producer: Any, log: Any) -> None:
        self._opts = opts
        self._producer = producer
        self._log = log
        #: Records copied so far.
        self.copied = 0

    async def run(self, stop: anyio.Event) -> None:
        """Copy until ``stop`` is set; commit only what was acknowledged."""
        from aiokafka import AIOKafkaConsumer

        opts = self._opts
        consumer = AIOKafkaConsumer(
            opts.topic,
            group_id=f"{opts.group}-repartitioner",
            **group_settings(opts),
        )
        await consumer.start()
        out = opts.repartition_topic
        try:
            while not stop.is_set():
                batches = await consumer.getmany(timeout_ms=100, max_records=10_000)
                if not batches:
                    continue
                sends = []
                commits: dict[Any, int] = {}
                for tp, records in batches.items():
                    source = f"{tp.topic}[{tp.partition}]"
                    for rec in records:
                        key = repartition_key(rec.value, rec.key, source)
                        sends.append((rec, key, await self._copy(out, key, rec)))
                    commits[tp] = records[-1].offset + 1
                    self.copied += len(records)
                await self._acked(out, sends)
                await consumer.commit(commits)
        finally:
            # Leave the group even when the run is cancelled (bounded: a
            # dead broker must not hold the exit).
            with anyio.move_on_after(CLOSE_TIMEOUT, shield=True):
                await consumer.stop()

    async def _copy(self, out: str, key: bytes, rec: Any) -> Any:
        """Hand one record to the producer; a record too large for it is
        replaced at once (see :meth:`_replace`)."""
        try:
            return await self._producer.send(
                out, key=key, value=rec.value, headers=rec.headers
            )
        except Exception as exc:
            if not _too_large(exc):
                raise
            return await self._replace(out, key, rec, exc)

    async def _acked(self, out: str, sends: list[tuple[Any, bytes, Any]]) -> None:
        """Wait for the copies; one the broker refused as too large (the
        repartition topic's ``max.message.bytes``) is replaced."""
        again = []
        for rec, key, fut in sends:
            try:
                await fut
            except Exception as exc:
                if not _too_large(exc):
                    raise
                again.append(await self._replace(out, key, rec, exc))
        await acked(again)

    async def _replace(self, out: str, key: bytes, rec: Any, exc: Exception) -> Any:
        """A short unreadable record under the same trace key instead of one
        that cannot be copied: the grader rejects it, which taints that trace
        (its open graders end in ``error``) as the original would have been.
        (Not an empty value: that is a tombstone, no event, tainting
        nothing.) Stopping instead met the same record again on every
        restart: the stage, and with it the whole topic, stalled for good."""
        self._log.warning(
            "input_rejected",
            topic=rec.topic,
            partition=rec.partition,
            offset=rec.offset,
            trace=key.decode("utf-8", "replace"),
            reason=f"record of {len(rec.value or b'')} bytes cannot be copied into the repartition topic ({exc}); raise the topic's max.message.bytes if such records are expected",
        )
        size = len(rec.value or b"")
        stub = f'{{"trajgrade_rejected": "a record of {size} bytes at {rec.topic}[{rec.partition}]@{rec.offset} was too large to repartition"'
        return await self._producer.send(out, key=key, value=stub.encode())
