#!/usr/bin/env python3
"""Hosting engines: trajgrade inside Quix Streams against its own Kafka runner.

Usage::

    python benchmarks/engines.py [--size small|medium] [--bootstrap HOST:PORT] [--quick]

What it measures (figures are printed, never asserted), in one run on the
same corpus (``../shared/bench/gen_traces.py``, as ``benchmarks/run.py``):

1. the per-trace host alone (``TraceHost``, in-process): events/s with the
   state snapshotted and restored at every event, as a host's store does;
2. the Quix Streams pipeline in-process through ``sdf.test()`` (no broker):
   the stateful apply on RocksDB, the idle session window, headers, JSON;
3. on tansu (started on a free loopback port unless ``--bootstrap``), a
   topic of ``PARTITIONS`` partitions pre-filled with the corpus, graded by
   one built-in consumer (``trajgrade grade --kafka-bootstrap``) and by one
   process of the Quix example application
   (``python -m trajgrade.integrations.quix_app``, at-least-once, idle
   timer on), each in its own group: events/s from the group's first
   committed offset until every record is committed (group joins and
   start-up are not counted; committed offsets polled every 20 ms);
4. the bytes per open trace of the host's state for the six benchmark
   checks (``six.yaml``): the snapshot Quix stores per key (target <= 1 KB).

Both runners grade ``bench.yaml`` (three of the checks, no code), so the
ratio compares the engines, not the policies. The development machine has
2 cores shared by the broker, the producer and the consumer.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path.insert(0, str(BENCH_DIR))
from kafka import committed, create, fill, start_tansu, stop  # noqa: E402
from run import ensure_corpus, find_shared  # noqa: E402

CONFIG = BENCH_DIR / "bench.yaml"
SIX = BENCH_DIR / "six.yaml"
PARTITIONS = 4
TARGET_BYTES = 1024


# ---------------------------------------------------------------- in-process
def host_rate(lines: list[bytes]) -> float:
    """Events/s of TraceHost with a snapshot and a restore at every event."""
    from trajgrade.api import TraceHost

    host = TraceHost.from_policy(CONFIG)
    stored: dict[str, bytes] = {}
    t0 = time.perf_counter()
    for line in lines:
        tid = host.trace_id_of(line) or ""
        state = host.restore(stored[tid]) if tid in stored else host.open(tid)
        host.feed(state, line)
        stored[tid] = host.snapshot(state)
    return len(lines) / (time.perf_counter() - t0)


def sdf_test_rate(lines: list[bytes], keys: list[str], tmp: Path) -> float:
    """Events/s of the Quix pipeline through ``sdf.test()`` (one partition)."""
    from quixstreams import Application
    from quixstreams.models import MessageContext, Topic
    from quixstreams.models.topics.topic import TopicConfig

    from trajgrade.integrations.quixstreams import QuixGrader, grade

    app = Application(
        broker_address="127.0.0.1:9",
        state_dir=str(tmp / "sdf"),
        use_changelog_topics=False,
    )
    topic = Topic("events", key_deserializer="str", value_deserializer="bytes")
    topic.broker_config = TopicConfig(
        num_partitions=1,
        replication_factor=1,
        extra_config={"retention.ms": "-1", "retention.bytes": "-1"},
    )
    sdf = grade(
        app.dataframe(topic), QuixGrader.from_policy(CONFIG), idle=timedelta(minutes=30)
    )
    # (sdf.test() without a consumer: the store partition an assignment opens)
    app._state_manager.on_partition_assign(
        stream_id=sdf.stream_id, partition=0, committed_offsets={}
    )
    app._processing_context.init_checkpoint()
    t_ms = int(time.time() * 1000)
    t0 = time.perf_counter()
    for i, (key, line) in enumerate(zip(keys, lines, strict=True)):
        ctx = MessageContext(topic="events", partition=0, offset=i, size=len(line))
        sdf.test(line, key=key, timestamp=t_ms + i, ctx=ctx)
    rate = len(lines) / (time.perf_counter() - t0)
    app._state_manager.close()
    return rate


def state_bytes(lines: list[bytes]) -> list[int]:
    """The snapshot of every open trace after each of its events (six checks)."""
    from trajgrade.api import TraceHost

    host = TraceHost.from_policy(SIX, allow_code=True)
    states: dict[str, Any] = {}
    sizes = []
    for line in lines:
        tid = host.trace_id_of(line) or ""
        state = states.setdefault(tid, host.open(tid))
        host.feed(state, line)
        if not state.closed:
            sizes.append(len(host.snapshot(state)))
    return sizes


# ---------------------------------------------------------------- on the broker
def drain_rate(bootstrap: str, group: str, topic: str, total: int, proc: Any) -> float:
    """Events/s of one consumer process: from its group's first committed
    offset until all ``total`` records are committed."""

    async def measure() -> float:
        from aiokafka.admin import AIOKafkaAdminClient

        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            deadline = time.monotonic() + 900
            start_n, start_t = 0, 0.0
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    raise SystemExit(f"the {group} process exited early")
                n = await committed(admin, group, topic)
                if n and not start_n:
                    start_n, start_t = n, time.perf_counter()
                if n >= total:
                    if n == start_n:
                        return float("nan")  # all of it in the first commit
                    return (n - start_n) / (time.perf_counter() - start_t)
                await asyncio.sleep(0.02)
            raise SystemExit(f"{group} did not finish in 900 s")
        finally:
            await admin.close()

    try:
        return asyncio.run(measure())
    finally:
        stop([proc])


def builtin(bootstrap: str, topic: str, total: int, tmp: Path) -> float:
    group = f"builtin-{uuid.uuid4().hex[:6]}"
    argv = [
        sys.executable, "-m", "trajgrade", "grade", "-c", str(CONFIG), "--output", "jsonl",
        "--kafka-bootstrap", bootstrap, "--topic", topic, "--group", group,
        "--kafka-session-timeout", "6", "--log-level", "warning",
    ]  # fmt: skip
    with (tmp / f"{group}.err").open("wb") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
        return drain_rate(bootstrap, group, topic, total, proc)


def quix(bootstrap: str, topic: str, total: int, tmp: Path) -> float:
    group = f"quix-{uuid.uuid4().hex[:6]}"
    argv = [
        sys.executable, "-m", "trajgrade.integrations.quix_app",
        "--broker", bootstrap, "--input", topic, "--output", f"{group}-out",
        "--group", group, "--policy", str(CONFIG), "--state-dir", str(tmp / group),
        "--commit-interval", "1", "--session-timeout-ms", "6000",
    ]  # fmt: skip
    with (tmp / f"{group}.err").open("wb") as err:
        proc = subprocess.Popen(argv, stdout=err, stderr=subprocess.STDOUT)
        return drain_rate(bootstrap, group, topic, total, proc)


def _rate(rate: float) -> str:
    if rate != rate:  # NaN
        return (
            "done within its first commit (too few events to time: use --size medium)"
        )
    return f"{rate:>9,.0f} events/s"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=["small", "medium"], default="medium")
    ap.add_argument("--bootstrap", default=None, help="use a running broker")
    ap.add_argument(
        "--quick", action="store_true", help="the small corpus (a smoke run)"
    )
    ap.add_argument("--shared", default=None)
    args = ap.parse_args()
    size = "small" if args.quick else args.size

    corpus = ensure_corpus(find_shared(args.shared), size) / "events.jsonl"
    lines = [x for x in corpus.read_bytes().split(b"\n") if x.strip()]
    keys = [json.loads(x)["trace_id"] for x in lines]
    scratch = tempfile.TemporaryDirectory(prefix="trajgrade-engines-bench-")
    tmp = Path(scratch.name)
    print(
        f"corpus {size}: {len(lines):,} events, {len(set(keys)):,} traces", flush=True
    )
    host = host_rate(lines)
    print(
        f"trace host, in-process (snapshot + restore per event): {host:>9,.0f} events/s",
        flush=True,
    )
    sdf = sdf_test_rate(lines, keys, tmp)
    print(
        f"quix pipeline, in-process (sdf.test, no broker):       {sdf:>9,.0f} events/s",
        flush=True,
    )
    sizes = state_bytes(lines)
    print(
        f"state per open trace, six checks: median {statistics.median(sizes):.0f} B, "
        f"max {max(sizes)} B (target <= {TARGET_BYTES} B: "
        f"{'met' if max(sizes) <= TARGET_BYTES else 'MISSED'}) over {len(sizes):,} snapshots",
        flush=True,
    )
    broker, bootstrap = None, args.bootstrap
    if bootstrap is None:
        broker, bootstrap = start_tansu(tmp / "tansu.log")
    try:
        topic = f"engines-{uuid.uuid4().hex[:6]}"
        asyncio.run(create(bootstrap, topic))
        asyncio.run(fill(bootstrap, topic, lines, [k.encode() for k in keys]))
        one = builtin(bootstrap, topic, len(lines), tmp)
        print(
            f"built-in consumer on tansu ({PARTITIONS} partitions):        {_rate(one)}",
            flush=True,
        )
        app = quix(bootstrap, topic, len(lines), tmp)
        ratio = (
            f" ({app / one:.2f}x the built-in consumer)"
            if one == one and app == app
            else ""
        )
        print(
            f"quix application on tansu ({PARTITIONS} partitions):         {_rate(app)}{ratio}",
            flush=True,
        )
    finally:
        if broker is not None:
            broker.terminate()
            broker.wait(10)
        scratch.cleanup()


if __name__ == "__main__":
    main()
