"""Where a Kafka run's verdicts and guard decisions go: a topic, or the
command's own sink.

:class:`TopicSink` writes each verdict to ``--verdicts-topic`` with the trace
id as key (so all of a trace's verdicts land on one partition, in order) and
the verdict JSON as value, byte for byte what the JSONL sink writes, plus a
``verdict-id`` header: a consumer can drop re-emitted duplicates without
parsing the value. Guard decisions go to the same topic, after the batch's
verdicts when ``--export-decisions`` asks for them (a grading topic holds
verdicts only, else), as the decision stream's records (``"type": "decision"`` first)
with a ``decision-id`` header (a digest of the record: a replayed batch
decides the same calls identically, so a duplicate has the same id).
:meth:`flush` returns once the broker acknowledged every send
(``acks=all``), which is what lets the runner commit input offsets.

:class:`LocalSink` adapts the command's stdout sink (JSONL or pretty) to the
same async shape; its flush is a write plus ``flush()`` of stdout. Decisions
reach the sinks that take them (``--export-otlp`` with ``--export-decisions``); ``--decisions PATH``
is written by the runner after the flush.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Protocol

import msgspec

from trajgrade._util.digest import blake2b
from trajgrade.errors import SourceError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Sequence

    from trajgrade.sinks import DecisionSink, RunSink, Sink
    from trajgrade.verdicts import GuardDecision, Verdict

__all__ = (
    "CLOSE_TIMEOUT",
    "REQUEST_TIMEOUT",
    "ChangelogWentBack",
    "LocalSink",
    "TopicSink",
    "VerdictSink",
    "acked",
    "check_verdicts_topic",
    "decision_id",
)

#: Seconds a Kafka client may take to stop (leave its group, flush what is
#: queued): a dead broker must not hold the process's exit forever.
CLOSE_TIMEOUT: Final = 30.0
#: Seconds the producer waits for a broker's answer (aiokafka's default, made
#: explicit: the shutdown's worst case, and so the deploy files' grace
#: periods, are counted from it).
REQUEST_TIMEOUT: Final = 40.0


async def acked(
    sends: Sequence[Awaitable[Any]],
    high: dict[int, int] | None = None,
    floor: dict[int, int] | None = None,
) -> None:
    """Wait until every send is acknowledged; raise the first failure.
    ``high``: per partition, raised to the highest offset written there.
    ``floor``: per partition, an offset every write must land above (the
    changelog's restore sentinel); one at or below it means the topic was
    deleted and created again under us (:class:`ChangelogWentBack`).

    aiokafka's ``send`` hands back asyncio futures (its API, so they cannot be
    anyio objects). Awaiting them in turn is all ``gather`` would do here;
    every one is awaited even after a failure, so none is left with an
    unretrieved exception.
    """
    first: BaseException | None = None
    for fut in sends:
        try:
            md = await fut
        except Exception as exc:
            if first is None:
                first = exc
            continue
        if high is not None and md.offset > high.get(md.partition, -1):
            high[md.partition] = md.offset
        if first is None and floor is not None:
            below = floor.get(md.partition, -1)
            if md.offset <= below:
                first = ChangelogWentBack(md.topic, md.partition, md.offset, below)
    if first is not None:
        raise first


class ChangelogWentBack(SourceError):
    """A changelog write landed at or below the partition's restore sentinel."""

    def __init__(self, topic: str, partition: int, offset: int, floor: int) -> None:
        what = (
            f"went back (a write landed at offset {offset}, below {floor + 1}, where it stood when this consumer restored it)"
            if offset >= 0
            else "is gone (the topic has fewer partitions now)"
        )
        super().__init__(
            f"changelog {topic!r} partition {partition} {what}: the topic was deleted, or the broker lost its data, and a write "
            "created it again, perhaps with the broker's defaults (not compacted, another partition count). The state of "
            "open traces it held is gone. Delete the topic (trajgrade creates it compacted, with the input's partition "
            "count) and restart: open traces start over; or grade with a new --group"
        )


async def check_verdicts_topic(producer: Any, topic: str) -> None:
    """Fail at start-up when ``--verdicts-topic`` cannot be written: missing
    (on a broker that does not create topics on use), not authorized, or an
    illegal name. Found only at the first verdict, the same fault held the
    first batch (and SIGTERM) for the client's 40 s metadata wait, then
    ended the run with a traceback and exit status 1."""
    import anyio
    from aiokafka.errors import KafkaError

    reason = None
    try:
        with anyio.fail_after(CLOSE_TIMEOUT):
            # A metadata request, as the first send would make: a broker
            # with auto.create.topics.enable creates the topic here.
            if await producer.partitions_for(topic):
                return
    except TimeoutError:
        reason = "no answer"
    except KafkaError as exc:
        reason = str(exc)
    msg = f"cannot write verdicts to topic {topic!r} ({reason or 'no partitions'}): create it, grant this client Write and Describe on it, or check --verdicts-topic"
    raise SourceError(msg)


def decision_id(encoded: bytes) -> str:
    """The ``decision-id`` header of a decision record: a digest of its JSON
    (the same call decided again on a replay gives the same record)."""
    return blake2b(encoded, digest_size=8).hexdigest()


class VerdictSink(Protocol):
    """Verdicts and decisions out: ``push`` hands what was sent on (its
    memory is downstream's from then on), ``flush`` returns once all of it
    is durable downstream."""

    def send(self, verdicts: Sequence[Verdict]) -> None: ...

    def send_decisions(self, decisions: Sequence[GuardDecision]) -> None: ...

    async def push(self) -> None: ...

    async def flush(self) -> None: ...


class LocalSink:
    """The command's stdout/JSONL sink behind the async interface."""

    def __init__(self, sink: RunSink) -> None:
        self._sink = sink

    def send(self, verdicts: Sequence[Verdict]) -> None:
        self._sink.send(verdicts)

    def send_decisions(self, decisions: Sequence[GuardDecision]) -> None:
        # To the sinks that take them (--export-otlp); stdout does not
        # (``--decisions -`` is the runner's).
        self._sink.send_decisions(decisions)

    async def push(self) -> None:
        self._sink.flush()

    async def flush(self) -> None:
        self._sink.flush()


class TopicSink:
    """Verdicts to a Kafka topic, keyed by trace id, id in a header; and to
    the ``also`` sinks (``--junit``, ``--export-otlp``), which the topic
    replaces stdout beside, not them; guard decisions also to
    ``decision_sinks`` (those of ``also`` that take them)."""

    def __init__(
        self,
        producer: Any,
        topic: str,
        also: Sequence[Sink] = (),
        decision_sinks: Sequence[DecisionSink] = (),
        *,
        decisions: bool = False,
    ) -> None:
        self._producer = producer
        #: ``--export-decisions``: decisions go to the topic too (off: the
        #: topic holds verdicts only).
        self._to_topic = decisions
        self._topic = topic
        self._also = list(also)
        self._decision_sinks = list(decision_sinks)
        self._enc = msgspec.json.Encoder()
        self._queued: list[Verdict] = []
        self._decisions: list[GuardDecision] = []
        #: Records handed to the producer and not yet acknowledged.
        self._pending: list[Any] = []

    def send(self, verdicts: Sequence[Verdict]) -> None:
        self._queued.extend(verdicts)
        for s in self._also:
            s.send(verdicts)

    def send_decisions(self, decisions: Sequence[GuardDecision]) -> None:
        if self._to_topic:
            self._decisions.extend(decisions)
        for s in self._decision_sinks:
            s.send_decisions(decisions)

    async def push(self) -> None:
        """Hand the queued records to the producer (encoded: a few hundred
        bytes each) without waiting for their acknowledgements."""
        queued, self._queued = self._queued, []
        decisions, self._decisions = self._decisions, []
        send = self._producer.send
        enc = self._enc.encode
        pending = self._pending
        pending += [
            await send(
                self._topic,
                key=v.trace_id.encode(),
                value=enc(v),
                headers=[("verdict-id", v.id.encode())],
            )
            for v in queued
        ]
        for d in decisions:
            value = enc(d)
            pending.append(
                await send(
                    self._topic,
                    key=d.trace_id.encode(),
                    value=value,
                    headers=[("decision-id", decision_id(value).encode())],
                )
            )

    async def flush(self) -> None:
        await self.push()
        for s in self._also:
            s.flush()
        pending, self._pending = self._pending, []
        await acked(pending)
