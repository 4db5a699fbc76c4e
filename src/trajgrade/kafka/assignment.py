"""Internal topics and assignments that cannot hang a consumer.

A broker that lost its data (restarted on memory storage, a cluster
rebuilt) and got its input topic recreated still hands out assignments,
but the changelog topic is gone. Restoring state then sent a sentinel to a
partition no topic has, and waited for it forever, inside the rebalance
listener, holding the lock the grading loop needs: the consumer fell silent
and ignored SIGTERM.

So, on *every* assignment (not only at start-up):

* the internal topics (changelog, and the repartition topic with
  ``--repartition``) are checked and created again when missing, with as many
  partitions as the input topic; a mismatch is a fatal error naming the fix;
* the whole assignment (topic checks, committed offsets, changelog restore)
  runs under a time limit; running out is a fatal, explained error;
* a shutdown signal cancels an assignment in progress at once.

A fatal error is handed to the grading loop, which ends the run (exit status
2) instead of going on with state it could not restore.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import anyio

from trajgrade.errors import BrokerError, SourceError

if TYPE_CHECKING:
    from trajgrade.kafka.options import KafkaOptions

__all__ = (
    "ADMIN_TIMEOUT",
    "ASSIGN_TIMEOUT",
    "AssignGuard",
    "ensure_internal_topics",
    "ensure_topic",
    "partitions_of",
)

#: Longest an assignment may go without progress (topic checks, and the
#: changelog restore between two fetches that bring records).
ASSIGN_TIMEOUT: Final = 120.0
#: Segment size of the changelog trajgrade creates (see ``ensure_topic``).
SEGMENT_BYTES: Final = 64 * 1024 * 1024
#: Longest one admin round trip (or offset commit) may take.
ADMIN_TIMEOUT: Final = 30.0


async def partitions_of(admin: Any, topic: str, bootstrap: str) -> int:
    """How many partitions ``topic`` has (waits briefly for a new one).

    Looked up in the list of topics first: the metadata request of
    ``describe_topics`` creates a missing topic, with the broker's default
    partition count, on brokers with ``auto.create.topics.enable`` (Apache
    Kafka's default; tansu too), so a misspelt ``--topic`` was created and
    waited on forever instead of reported."""
    for _ in range(50):
        with anyio.fail_after(ADMIN_TIMEOUT):
            found = []
            if topic in await admin.list_topics():
                found = await admin.describe_topics([topic])
        for t in found:
            if t.get("topic") == topic and t.get("error_code") == 0 and t["partitions"]:
                return len(t["partitions"])
        await anyio.sleep(0.1)
    msg = f"topic {topic!r} was not found on {bootstrap}; create it (with one partition per consumer you plan to run) or check --topic"
    raise BrokerError(msg)


async def ensure_topic(
    admin: Any, topic: str, partitions: int, *, compact: bool
) -> bool:
    """Create ``topic`` unless it exists; True when it had to be created.
    Raises SourceError when it exists with another partition count."""
    from aiokafka.admin import NewTopic

    # Create first (a metadata request may auto-create a missing topic with
    # the broker's defaults); "already exists" comes back as an error code.
    # Compaction never touches a partition's active segment: at the broker's
    # default of 1 GiB, a restore could read that much per partition before
    # its state is whole. 64 MiB bounds it (a few seconds to read).
    configs = (
        {"cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES)}
        if compact
        else {}
    )
    with anyio.fail_after(ADMIN_TIMEOUT):
        # Three replicas where the cluster has three brokers (the usual
        # durability floor), fewer on a smaller one.
        brokers = len((await admin.describe_cluster()).get("brokers") or [1])
        response = await admin.create_topics(
            [NewTopic(topic, partitions, min(3, brokers), topic_configs=configs)]
        )
    errors = getattr(response, "topic_errors", None) or getattr(response, "topics", [])
    created = any(e[0] == topic and e[1] == 0 for e in errors)
    have = await partitions_of(admin, topic, "the cluster")
    if have != partitions:
        msg = f"internal topic {topic!r} has {have} partitions but the input has {partitions}; it must match: delete it (its state is then lost) or use a new --group"
        raise SourceError(msg)
    return created


async def ensure_internal_topics(
    admin: Any, kafka: KafkaOptions, log: Any, *, initial: bool
) -> int:
    """Check (and create again) the run's internal topics; the input's
    partition count. After start-up a missing changelog means its state is
    gone: that is logged, and the partitions start from empty state."""
    n = await partitions_of(admin, kafka.topic, kafka.bootstrap)
    topics = [(kafka.changelog_topic, True)]
    if kafka.repartition:
        topics.append((kafka.repartition_topic, False))
    for topic, compact in topics:
        created = await ensure_topic(admin, topic, n, compact=compact)
        if created and not initial:
            log.warning(
                "internal_topic_recreated",
                topic=topic,
                partitions=n,
                reason="the topic was missing at a rebalance (the broker lost its data?); the state it held is gone, open traces start over",
            )
    return n


class AssignGuard:
    """Runs assignments under a time limit; a shutdown cancels one at once."""

    def __init__(self, timeout: float = ASSIGN_TIMEOUT) -> None:
        self.timeout = timeout
        self._scope: anyio.CancelScope | None = None
        self._limit: anyio.CancelScope | None = None
        self._stopping = False

    def progress(self) -> None:
        """The assignment is moving (a restore read records): its time limit
        starts again. A limit on the whole assignment failed every restore
        of a changelog too large to read in that time, on every restart."""
        if self._limit is not None:
            self._limit.deadline = anyio.current_time() + self.timeout

    def cancel(self) -> None:
        """Shutting down: abandon the assignment in progress, if any."""
        self._stopping = True
        if self._scope is not None:
            self._scope.cancel()

    async def run(self, assign: Any, tps: Any) -> None:
        """``await assign(tps)``; SourceError when it takes too long."""
        if self._stopping:
            return
        with anyio.CancelScope() as scope:
            self._scope = scope
            try:
                with anyio.fail_after(self.timeout) as limit:
                    self._limit = limit
                    await assign(tps)
            except TimeoutError:
                msg = f"a partition assignment made no progress for {self.timeout:g}s (checking the internal topics and restoring state from the changelog); check that the broker is healthy, then restart"
                raise SourceError(msg) from None
            except Exception as exc:
                from aiokafka.errors import KafkaError

                if not isinstance(exc, KafkaError):
                    raise
                msg = f"a partition assignment failed ({exc!r}) while checking the internal topics or restoring state from the changelog; check that the broker is healthy, then restart"
                raise SourceError(msg) from None
            finally:
                self._scope = self._limit = None
