"""The Kafka run: poll, grade, flush, checkpoint, commit; survive rebalances.

One task owns every engine (anyio, on the asyncio backend: aiokafka is
asyncio-only). Each loop iteration takes a batch from
``getmany`` and, under one lock shared with the rebalance listener:

1. decodes each partition's records and feeds its engine (one engine per
   assigned partition, :mod:`trajgrade.kafka.partition`), after checking
   that no trace it names is open or closed on another partition of ours;
2. fires the runner's clock (wall-time budgets), ``--idle-timeout`` and the
   ``--max-open-traces`` cap;
3. writes the verdicts, then the guard decisions, and waits until they are
   flushed (stdout, ``--decisions``) or acknowledged (``--verdicts-topic``);
4. then writes the changed traces' state to the changelog;
5. once those writes are acknowledged, commits the input offsets of the
   batch. Step 5 runs in the background while the next batch is graded
   (the broker's round trips overlap the grading instead of adding to it);
   the next batch waits for it before it schedules its own, so commits stay
   in order and at most one batch is unsettled.

That order is the delivery guarantee: an offset is committed only when
everything it caused is durable, and state is written only after its
verdicts, so a crash at any point loses nothing and re-emits at most
identical verdicts (ids are deterministic). A replay never double-counts
an event either (see :mod:`trajgrade.kafka.changelog`).

Rebalances: the listener takes the same lock, so a revocation waits for the
batch in flight, which commits; revoked partitions are parked (a local cache:
if the same partition comes back and its committed offset is still ours, the
parked engine is reused). An assignment restores each new partition from its
changelog before any of its records is graded.

Shutdown: SIGINT/SIGTERM finish the current batch (flushed, checkpointed,
committed), then the consumer leaves the group so its partitions move at
once. Open traces stay open: their state is in the changelog for whoever
takes the partitions next. A second signal exits at once (status 130).
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections import OrderedDict, deque
from typing import TYPE_CHECKING, Any, Final

import anyio
import click
import msgspec

from trajgrade._signals import graceful_signals
from trajgrade.errors import SourceError
from trajgrade.exit_status import dropped_counts
from trajgrade.kafka.assignment import (
    ADMIN_TIMEOUT,
    AssignGuard,
    ensure_internal_topics,
)
from trajgrade.kafka.changelog import restore_partitions
from trajgrade.kafka.options import client_settings
from trajgrade.kafka.partition import PartitionWorker
from trajgrade.kafka.sink import CLOSE_TIMEOUT, LocalSink, TopicSink, acked
from trajgrade.runner import RunSummary
from trajgrade.verdicts import Outcome

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence

    from anyio.abc import TaskGroup

    from trajgrade.actions import ActionOptions, Actions
    from trajgrade.config import Suite
    from trajgrade.kafka.options import KafkaOptions
    from trajgrade.kafka.partition import Problem
    from trajgrade.kafka.sink import VerdictSink
    from trajgrade.metrics import Metrics
    from trajgrade.runner import RunOptions
    from trajgrade.sinks import Sink
    from trajgrade.sinks.decisions import DecisionWriter
    from trajgrade.verdicts import GuardDecision, Verdict

__all__ = ("run_kafka", "runner_for")

#: Records per poll: large enough that per-batch round trips (flush,
#: changelog acks, commit) vanish at full speed; a slow trickle is polled
#: as it comes.
MAX_RECORDS: Final = 10_000
#: How long one poll waits for records before housekeeping runs anyway.
POLL_MS: Final = 100
#: Longest a fetch waits for more records (latency bound at low rates).
FETCH_WAIT_MS: Final = 20
#: Graded batches whose changelog acks and commit may be pending at once.
#: Their commits still happen in batch order; more than one lets grading run
#: ahead of a slow broker round trip (the produce -> verdict latency).
SETTLING_MAX: Final = 4
#: Split traces remembered so each is reported once.
SPLIT_MEMORY: Final = 10_000


class _Grader:
    """Everything one Kafka run holds; the loop and the listener share it."""

    def __init__(
        self,
        suite: Suite,
        options: RunOptions,
        kafka: KafkaOptions,
        out: VerdictSink,
        log: Any,
        metrics: Metrics | None,
    ) -> None:
        self.suite = suite
        self.options = options
        self.kafka = kafka
        self.out = out
        self.log = log
        self.metrics = metrics
        # Shared with the rebalance listener, which aiokafka runs in its own
        # coordinator task (an asyncio task; anyio's lock serves any task).
        self.lock = anyio.Lock()
        self.workers: dict[int, PartitionWorker] = {}
        self.parked: dict[int, PartitionWorker] = {}
        #: Open trace -> the partition it is graded on (split detection).
        self.owner: dict[str, int] = {}
        #: (partition, trace) least recently active first (the cap's policy).
        self.lru: OrderedDict[tuple[int, str], None] = OrderedDict()
        self.split: OrderedDict[str, str] = OrderedDict()
        self.summary = RunSummary()
        self.failed: dict[str, None] = {}
        self.fatal: BaseException | None = None
        #: On-fail actions (--on-fail, --signal, --fail-fast) and the event
        #: that ends the run.
        self.actions: Actions | None = None
        #: ``--decisions PATH|-``: the decision stream (also on the topic).
        self.decision_file: DecisionWriter | None = None
        self.stop: anyio.Event | None = None
        self.clocked = any(g.uses_clock for g in suite.graders)
        self.consumer: Any = None
        self.producer: Any = None
        #: Runs the batches' settling (changelog acks, then commit).
        self.tg: TaskGroup | None = None
        #: One event per scheduled batch still settling, oldest first; each
        #: is set once that batch is committed (or its commit failed).
        self._settling: deque[anyio.Event] = deque()
        #: A batch's state write failed: nothing after it is committed.
        self._broken = False
        self.restorer: Any = None
        self.admin: Any = None
        #: Time limit of assignments; a shutdown cancels one in progress.
        self.guard = AssignGuard()
        self.topic = kafka.repartition_topic if kafka.repartition else kafka.topic
        self._last_housekeeping = 0.0
        self._events_before = 0

    # ------------------------------------------------------------ rebalances
    async def revoked(self, tps: Any) -> None:
        async with self.lock:
            # The batch in flight commits before its partitions move.
            await self.settled()
            gone = sorted(tp.partition for tp in tps if tp.topic == self.topic)
            for p in gone:
                worker = self.workers.pop(p, None)
                if worker is not None:
                    self.parked[p] = worker
            self._forget_partitions(set(gone))
            if gone:
                self.log.info("partitions_revoked", topic=self.topic, partitions=gone)
            if self.metrics is not None:
                self.metrics.set_ready(False)

    async def assigned(self, tps: Any) -> None:
        try:
            async with self.lock:
                await self.guard.run(self._assign, tps)
        except BaseException as exc:
            # aiokafka logs and swallows listener errors: hand it to the loop.
            self.fatal = exc
            raise

    async def _assign(self, tps: Any) -> None:
        started = time.monotonic()
        await ensure_internal_topics(self.admin, self.kafka, self.log, initial=False)
        new = sorted(
            tp.partition
            for tp in tps
            if tp.topic == self.topic and tp.partition not in self.workers
        )
        committed: dict[int, int | None] = {}
        for tp in tps:
            if tp.partition in new:
                committed[tp.partition] = await self.consumer.committed(tp)
        reuse = [
            p
            for p in new
            if p in self.parked and self.parked[p].position == committed[p]
        ]
        fresh = [p for p in new if p not in reuse]
        restored = await restore_partitions(
            self.producer,
            self.restorer,
            self.kafka.changelog_topic,
            fresh,
            fingerprint=self.suite.fingerprint,
        )
        for p in reuse:
            self.workers[p] = self.parked[p]
        self.parked = {p: w for p, w in self.parked.items() if p not in new}
        n_traces = 0
        for p in fresh:
            state = restored[p]
            worker = PartitionWorker(
                self.topic,
                p,
                self.suite,
                fmt=self.options.fmt,
                max_line_bytes=self.options.max_line_bytes,
                samples=self.options.samples,
                restored=state,
                otlp=self.kafka.otlp,
            )
            worker.position = committed[p]
            self.workers[p] = worker
            n_traces += len(state.state.traces)
        for p in new:
            for tid in self.workers[p].engine.open_traces():
                self.owner[tid] = p
                self.lru[(p, tid)] = None
        if self.metrics is not None:
            self.metrics.rebalances.inc()
            self.metrics.restored_traces.inc(n_traces)
            self.metrics.set_ready(True)
        self.log.info(
            "partitions_assigned",
            topic=self.topic,
            partitions=sorted(self.workers),
            restored=fresh,
            reused=reuse,
            restored_traces=n_traces,
            seconds=round(time.monotonic() - started, 3),
        )

    def _forget_partitions(self, gone: set[int]) -> None:
        if not gone:
            return
        self.owner = {t: p for t, p in self.owner.items() if p not in gone}
        for key in [k for k in self.lru if k[0] in gone]:
            del self.lru[key]

    # ------------------------------------------------------------ grading
    async def step(self, batches: dict[Any, list[Any]]) -> None:
        """Grade one poll's records, flush, checkpoint; commit in the background."""
        async with self.lock:
            if self.fatal is not None:
                raise self.fatal
            now = time.time()
            verdicts: list[Verdict] = []
            touched: dict[int, set[str]] = {}
            commits: dict[Any, int] = {}
            records_in = 0
            for tp, records in batches.items():
                worker = self.workers.get(tp.partition)
                if worker is None or tp.topic != self.topic:
                    continue  # revoked while the poll was in flight
                if worker.position is not None and records[0].offset < worker.position:
                    records = [r for r in records if r.offset >= worker.position]
                    if not records:
                        continue
                records_in += len(records)
                decoded, problems = worker.decode(records)
                names = decoded.trace_ids(worker.default_trace)
                self._check_split(worker, names, touched)
                out, more = worker.feed(decoded, now)
                self._report(worker, problems + more)
                names.update(v.trace_id for v in out)
                order = decoded.trace_order(worker.default_trace)
                self._track(worker, [*order, *names.difference(order)])
                touched.setdefault(tp.partition, set()).update(names)
                verdicts.extend(out)
                commits[tp] = decoded.end
            verdicts.extend(self._housekeeping(now, touched))
            await self._emit(verdicts, self._decisions())
            sends = await self._checkpoint(touched)
            while len(self._settling) >= SETTLING_MAX:
                await self._settling[0].wait()
                self._settling.popleft()
            if sends or commits:
                assert self.tg is not None, "run_kafka sets the task group"
                before = self._settling[-1] if self._settling else None
                done = anyio.Event()
                self._settling.append(done)
                self.tg.start_soon(self._settle, sends, commits, before, done)
            self._account(records_in)

    async def settled(self) -> None:
        """Wait until every graded batch is committed (or its commit failed
        and was logged)."""
        while self._settling:
            await self._settling[0].wait()
            self._settling.popleft()

    async def _settle(
        self,
        sends: list[Awaitable[Any]],
        commits: dict[Any, int],
        before: anyio.Event | None,
        done: anyio.Event,
    ) -> None:
        """Commit a batch's offsets once its state is acknowledged and the
        batch before it is committed (commits stay in order). A failed state
        write raises here and so ends the run (uncommitted: replayed)."""
        try:
            try:
                await acked(sends)
            except BaseException:
                self._broken = True  # no later batch may commit past this one
                raise
            if before is not None:
                await before.wait()
            if commits and not self._broken:
                await self._commit(commits)
        finally:
            done.set()

    def _check_split(
        self, worker: PartitionWorker, names: set[str], touched: dict[int, set[str]]
    ) -> None:
        """A trace also open or closed on another of our partitions is split:
        both sides are tainted (error verdicts), reported once."""
        p = worker.partition
        owner = self.owner
        for tid in names:
            other = owner.get(tid)
            if other is None or other == p:
                others = [
                    q
                    for q, w in self.workers.items()
                    if q != p and w.engine.is_closed(tid)
                ]
                if not others:
                    continue
                other = others[0]
            reason = f"trace {tid!r} is on partitions {other} and {p} of topic {self.topic}: no partition sees all its events; producers must key records by trace id, or grade with --repartition"
            worker.taint(tid, reason)
            if other in self.workers:
                self.workers[other].taint(tid, reason)
                touched.setdefault(other, set()).add(tid)
            if tid not in self.split:
                self.split[tid] = f"{other},{p}"
                if len(self.split) > SPLIT_MEMORY:
                    self.split.popitem(last=False)
                self.log.warning(
                    "trace_split",
                    topic=self.topic,
                    trace=tid,
                    partitions=[other, p],
                    reason=reason,
                )
                if self.metrics is not None:
                    self.metrics.split_traces.inc()

    def _housekeeping(self, now: float, touched: dict[int, set[str]]) -> list[Verdict]:
        """Clock, idle timeout, open-trace cap; keep owner/LRU maps current."""
        out: list[Verdict] = []
        due = now - self._last_housekeeping >= self.options.tick_interval
        if due:
            self._last_housekeeping = now
        idle = self.options.idle_timeout
        for p, worker in self.workers.items():
            engine = worker.engine
            fired: list[Verdict] = []
            if due and self.clocked:
                fired.extend(engine.tick(now))
            if due and idle is not None:
                # What the partition's reader holds for the traces about to
                # close (a response's usage) is graded first, as at end of input.
                for tid in engine.idle_traces(now, idle):
                    held = worker.decoder.flush_trace(tid)
                    if held.events:
                        fired.extend(worker.grading.feed(worker.decoder, held))
                expired = engine.expire(now, idle)
                if expired and self.metrics is not None:
                    self.metrics.expired_traces.inc(len({v.trace_id for v in expired}))
                fired.extend(expired)
            if fired:
                names = {v.trace_id for v in fired}
                touched.setdefault(p, set()).update(names)
                self._track(worker, names)
                out.extend(fired)
                self._report(worker, worker.problems())
        out.extend(self._enforce_cap(touched))
        return out

    def _track(self, worker: PartitionWorker, names: Iterable[str]) -> None:
        """Keep the owner map (split detection) and the LRU (cap) current."""
        p = worker.partition
        engine = worker.engine
        owner, lru = self.owner, self.lru
        for tid in names:
            key = (p, tid)
            if engine.is_closed(tid):
                lru.pop(key, None)
                if owner.get(tid) == p:
                    del owner[tid]
            else:
                owner.setdefault(tid, p)
                lru[key] = None
                lru.move_to_end(key)

    def _enforce_cap(self, touched: dict[int, set[str]]) -> list[Verdict]:
        cap = self.kafka.max_open_traces
        open_now = sum(w.engine.statistics().open_traces for w in self.workers.values())
        out: list[Verdict] = []
        while open_now > cap and self.lru:
            (p, tid), _ = self.lru.popitem(last=False)
            worker = self.workers.get(p)
            if worker is None:
                continue
            closed = worker.engine.end_trace(tid)
            if not closed:
                continue
            open_now -= 1
            if self.owner.get(tid) == p:
                del self.owner[tid]
            touched.setdefault(p, set()).add(tid)
            out.extend(closed)
            self._report(worker, worker.problems())
            self.log.warning(
                "trace_evicted",
                topic=self.topic,
                partition=p,
                trace=tid,
                reason=f"--max-open-traces {cap} reached: the least recently active trace was closed early with its final verdicts",
            )
            if self.metrics is not None:
                self.metrics.evicted_traces.inc()
        return out

    # ------------------------------------------------------------ durability
    def _decisions(self) -> list[GuardDecision]:
        """The guard decisions the batch made, drained from every engine."""
        out: list[GuardDecision] = []
        for worker in self.workers.values():
            made = worker.engine.decisions
            if made:
                out.extend(made)
                made.clear()
        return out

    async def _emit(
        self, verdicts: Sequence[Verdict], decisions: Sequence[GuardDecision] = ()
    ) -> None:
        if decisions:
            self.out.send_decisions(decisions)
        if not verdicts:
            if decisions:
                await self.out.flush()
                self._decided(decisions)
            return
        if self.split:
            verdicts = [self._mark_split(v) for v in verdicts]
        counts = self.summary.verdicts
        for v in verdicts:
            if v.final:
                counts[v.outcome] = counts.get(v.outcome, 0) + 1
                if v.outcome is not Outcome.PASS:
                    self.failed[v.trace_id] = None
        if self.metrics is not None:
            self.metrics.count_verdicts(verdicts)
        self.out.send(verdicts)
        await self.out.flush()
        if self.actions is not None:
            self.actions.observe(verdicts)
        self._decided(decisions)

    def _decided(self, decisions: Sequence[GuardDecision]) -> None:
        """After the flush: ``--decisions``, then the actions (a decision
        trips --fail-fast/--signal as in the file runner)."""
        if decisions and self.decision_file is not None:
            self.decision_file.send(decisions)
        actions = self.actions
        if actions is not None:
            if decisions:
                actions.observe_decisions(decisions)
            if actions.stop_requested and self.stop is not None:
                self.summary.stopped = True
                self.stop.set()  # --fail-fast: finish this batch, commit, leave

    def _mark_split(self, v: Verdict) -> Verdict:
        where = self.split.get(v.trace_id)
        if where is None:
            return v
        meta = {**v.metadata, "kafka_split_partitions": where}
        return msgspec.structs.replace(v, metadata=meta)

    async def _checkpoint(self, touched: dict[int, set[str]]) -> list[Awaitable[Any]]:
        """Queue the touched traces' state; the acknowledgements to await."""
        topic = self.kafka.changelog_topic
        sends = []
        for p, names in touched.items():
            worker = self.workers.get(p)
            if worker is None:
                continue
            for key, value in worker.changelog(names):
                sends.append(
                    await self.producer.send(topic, key=key, value=value, partition=p)
                )
        return sends

    async def _commit(self, commits: dict[Any, int]) -> None:
        from aiokafka.errors import CommitFailedError, KafkaError

        try:
            with anyio.fail_after(ADMIN_TIMEOUT):  # a lost coordinator must not hang us
                await self.consumer.commit(commits)
        except (CommitFailedError, KafkaError, TimeoutError) as exc:
            # Verdicts and state are durable; a replay re-emits identical
            # verdicts and skips the events the state already holds.
            self.log.warning("commit_failed", topic=self.topic, reason=str(exc))
            return
        if self.metrics is not None:
            self.metrics.checkpointed()

    # ------------------------------------------------------------ reporting
    def _report(self, worker: PartitionWorker, problems: list[Problem]) -> None:
        for pr in problems:
            if pr.kind == "input_rejected":
                self.summary.input_errors += 1
                if self.metrics is not None:
                    self.metrics.input_errors.inc()
                self.log.warning(
                    "input_rejected",
                    topic=worker.topic,
                    partition=worker.partition,
                    offset=pr.offset,
                    trace=pr.trace,
                    reason=pr.reason,
                )
            elif pr.kind == "unanswered_calls":
                self.log.info("calls_unanswered", trace=pr.trace, reason=pr.reason)
            else:
                self.summary.anomalies += 1
                self.log.warning(
                    "input_anomaly",
                    topic=worker.topic,
                    partition=worker.partition,
                    offset=pr.offset,
                    trace=pr.trace,
                    kind=pr.kind,
                    reason=pr.reason,
                )

    def _account(self, records: int) -> None:
        m = self.metrics
        if m is None:
            return
        m.progress()
        events = self._events()
        m.events.inc(events - self._events_before)
        self._events_before = events
        if records:
            m.records.labels(self.topic).inc(records)
        stats = [w.engine.statistics() for w in self.workers.values()]
        m.open_traces.set(sum(t.open_traces for t in stats))
        late, settled = (
            sum(t.late_events for t in stats),
            sum(t.settled_events for t in stats),
        )
        m.sync_dropped(dropped_counts(late, settled, self.summary.input_errors))
        from aiokafka.structs import TopicPartition

        for p, w in self.workers.items():
            hw = self.consumer.highwater(TopicPartition(self.topic, p))
            if hw is not None and w.position is not None:
                m.consumer_lag.labels(self.topic, str(p)).set(max(hw - w.position, 0))

    def _events(self) -> int:
        every = {**self.parked, **self.workers}
        return sum(w.engine.statistics().events for w in every.values())

    def finish(self) -> RunSummary:
        every = {**self.parked, **self.workers}
        s = self.summary
        stats = [w.engine.statistics() for w in every.values()]
        s.events = sum(t.events for t in stats)
        s.traces = sum(t.closed_traces for t in stats)
        s.late_events = sum(t.late_events for t in stats)
        s.settled_events = sum(t.settled_events for t in stats)
        s.failed_traces = list(self.failed)
        return s


def _sole(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one error inside task groups' wrapping (so a :class:`SourceError`
    reaches the command as itself), or the group when there are several."""
    leaves: list[BaseException] = []
    todo: list[BaseException] = [group]
    while todo:
        exc = todo.pop()
        if isinstance(exc, BaseExceptionGroup):
            todo.extend(exc.exceptions)
        else:
            leaves.append(exc)
    return leaves[0] if len(leaves) == 1 else group


def runner_for(
    kafka: KafkaOptions, *, inputs: Sequence[str]
) -> Callable[..., Coroutine[Any, Any, RunSummary]]:
    """The ``run`` the ``grade`` command calls instead of the local runner's."""
    if inputs:
        msg = f"with --kafka-bootstrap the input is topic {kafka.topic!r}; drop the INPUT arguments ({' '.join(inputs)})"
        raise click.UsageError(msg)

    async def run(
        suite: Suite,
        options: RunOptions,
        sink: Sink,
        log: Any,
        *,
        actions: ActionOptions | None = None,
        status: Any = None,
    ) -> RunSummary:
        if options.state_dir is not None or options.live:
            msg = "--state, --follow and --watch are for files; a Kafka run keeps its state in the changelog topic"
            raise click.UsageError(msg)
        return await run_kafka(suite, options, sink, log, kafka=kafka, actions=actions)

    return run


async def run_kafka(
    suite: Suite,
    options: RunOptions,
    sink: Sink,
    log: Any,
    *,
    kafka: KafkaOptions,
    actions: ActionOptions | None = None,
) -> RunSummary:
    """Grade a Kafka topic until SIGINT/SIGTERM (or ``--fail-fast``); the
    summary of this process."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.abc import ConsumerRebalanceListener
    from aiokafka.admin import AIOKafkaAdminClient

    settings = client_settings(kafka)
    metrics = None
    server = None
    if kafka.metrics_port is not None:
        from trajgrade.metrics import Metrics

        metrics = Metrics()
        server = metrics.serve(kafka.metrics_port, host=kafka.metrics_host)
        log.info("metrics_serving", host=kafka.metrics_host, port=server.port)

    admin = AIOKafkaAdminClient(**settings)
    producer = AIOKafkaProducer(
        acks="all",
        linger_ms=0,
        max_batch_size=1024 * 1024,
        max_request_size=16 * 1024 * 1024,
        **settings,
    )
    out: VerdictSink = LocalSink(sink)
    if kafka.verdicts_topic is not None:
        out = TopicSink(producer, kafka.verdicts_topic)
    grader = _Grader(suite, options, kafka, out, log, metrics)
    grader.producer, grader.admin = producer, admin
    if options.decisions is not None:
        from trajgrade.sinks.decisions import open_decisions

        try:
            grader.decision_file = open_decisions(options.decisions)
        except OSError as exc:
            msg = f"cannot write guard decisions to {options.decisions}: {exc.strerror or exc}; check the path"
            raise SourceError(msg) from None

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        async def on_partitions_revoked(self, revoked: Any) -> None:
            await grader.revoked(revoked)

        async def on_partitions_assigned(self, assigned: Any) -> None:
            await grader.assigned(assigned)

    stop = anyio.Event()
    grader.stop = stop
    if actions is not None and actions.active:
        from trajgrade.actions import Actions

        grader.actions = Actions(actions, log, marks=suite.on_fail)

    def interrupt(signum: int) -> None:
        grader.summary.interrupted = True
        log.info("shutdown_requested", signal=signal.Signals(signum).name)
        stop.set()
        grader.guard.cancel()  # a hanging assignment must not hold the exit

    # First signal: finish the batch, flush, commit, leave; second: exit now.
    handlers = contextlib.ExitStack()
    handlers.enter_context(graceful_signals(interrupt))
    started: list[Any] = []
    try:
        try:
            for client in (admin, producer):
                await client.start()
                started.append(client)
            restorer = AIOKafkaConsumer(
                enable_auto_commit=False,
                group_id=None,
                max_partition_fetch_bytes=8 * 1024 * 1024,
                **settings,
            )
            await restorer.start()
            started.append(restorer)
            grader.restorer = restorer
            n = await ensure_internal_topics(admin, kafka, log, initial=True)
            stage = None
            if kafka.repartition:
                from trajgrade.kafka.repartition import Repartitioner

                stage = Repartitioner(kafka, producer, log)
            session_ms = int(kafka.session_timeout * 1000)
            consumer = AIOKafkaConsumer(
                group_id=kafka.group,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                session_timeout_ms=session_ms,
                heartbeat_interval_ms=max(session_ms // 3, 100),
                max_partition_fetch_bytes=8 * 1024 * 1024,
                fetch_max_bytes=64 * 1024 * 1024,
                # A broker holds an under-filled fetch this long: it bounds
                # the produce -> verdict latency of a slow trickle.
                fetch_max_wait_ms=FETCH_WAIT_MS,
                **settings,
            )
            grader.consumer = consumer
            consumer.subscribe([grader.topic], listener=Listener())
            await consumer.start()
            started.append(consumer)
        except Exception as exc:
            if isinstance(exc, SourceError):
                raise
            from aiokafka.errors import KafkaError

            if isinstance(exc, KafkaError):
                msg = f"cannot use Kafka at {kafka.bootstrap} ({exc}); check --kafka-bootstrap and the security options"
                raise SourceError(msg) from None
            raise
        log.info(
            "kafka_started",
            bootstrap=kafka.bootstrap,
            topic=grader.topic,
            group=kafka.group,
            partitions=n,
            changelog=kafka.changelog_topic,
            verdicts_topic=kafka.verdicts_topic,
        )
        try:
            async with anyio.create_task_group() as tg:
                grader.tg = tg
                if grader.actions is not None:
                    tg.start_soon(grader.actions.serve)
                # The stages end by themselves once ``stop`` is set; one that
                # fails cancels the grading loop and ends the run.
                async with anyio.create_task_group() as stages:
                    if stage is not None:
                        stages.start_soon(stage.run, stop)
                    while not stop.is_set():
                        batches = await consumer.getmany(
                            timeout_ms=POLL_MS, max_records=MAX_RECORDS
                        )
                        await grader.step(batches)
                    await grader.settled()
                if grader.actions is not None:
                    await grader.actions.drain(
                        grader.actions.options.on_fail_timeout + 1.0
                    )
                tg.cancel_scope.cancel()  # stops actions.serve
        except BaseExceptionGroup as group:
            raise _sole(group) from None
    finally:
        handlers.close()
        if metrics is not None:
            metrics.set_ready(False)
        # Shielded: the group is left and the producer flushed even when the
        # run was cancelled; bounded so a dead broker cannot hold the exit.
        with anyio.move_on_after(CLOSE_TIMEOUT, shield=True):
            for client in reversed(started):
                try:
                    await (client.close() if client is admin else client.stop())
                except Exception as exc:
                    log.warning("client_stop_failed", reason=repr(exc))
        if server is not None:
            server.close()
        if grader.decision_file is not None:
            grader.decision_file.close()
    if grader.fatal is not None:
        raise grader.fatal
    return grader.finish()
