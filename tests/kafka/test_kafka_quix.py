"""The Quix Streams example application on the test broker (tansu).

``python -m trajgrade.integrations.quix_app`` runs as a real process against
the suite's tansu broker: Quix's consumer group, its RocksDB state, its
changelog topics and its checkpoints. The recorded Claude Code and Codex
sessions (``trajgrade convert``ed) are produced keyed by trace id; the first
process is SIGKILLed half-way, a second one starts with an empty state
directory (so it recovers the traces' state from the changelog topics) and
grades the rest; tick records end the traces still open. The verdicts and
decisions are exactly ``trajgrade grade``'s on the same events; replayed
ones (at-least-once) are byte-identical, id included.

What the application needs that tansu lacks: DescribeConfigs answers
without entries, so the example fills in Kafka's default retention (Quix
derives its changelog topics' retention from the input's); and read_committed
consumers see aborted transactions, so exactly-once runs (its commits work)
but cannot be proven here (see docs/scale-out.md).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import _kafka as k

from trajgrade.api import TraceHost
from trajgrade.integrations.quixstreams import TICK_KEY
from trajgrade.pipeline.whole import grade_bytes

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SIX = ROOT / "benchmarks" / "six.yaml"
PARTITIONS = 3
_ENC = msgspec.json.Encoder()


class QuixApp:
    """One process of the example application."""

    def __init__(self, tmp: Path, name: str, args: list[str]) -> None:
        self.err_path = tmp / f"{name}.err"
        self._err = open(self.err_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "trajgrade.integrations.quix_app", *args],
            stdout=self._err,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        )

    def stop(self, sig: int) -> int:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._err.close()
        return self.proc.returncode


def _sessions() -> list[bytes]:
    logs = sorted((ROOT / "tests" / "fixtures" / "claude-code").glob("*.jsonl"))
    logs += sorted((ROOT / "tests" / "fixtures" / "codex").glob("*.jsonl"))
    done = subprocess.run(
        [sys.executable, "-m", "trajgrade", "convert", *map(str, logs)],
        capture_output=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        timeout=120,
    )
    return done.stdout.splitlines()


def _early(host: TraceHost, lines: list[bytes]) -> set[bytes]:
    """What the events of ``lines`` decide before their traces end."""
    states: dict[str, Any] = {}
    out = set()
    for line in lines:
        tid = host.trace_id_of(line)
        assert tid is not None
        state = states.setdefault(tid, host.open(tid))
        out.update(o.to_json() for o in host.feed(state, line))
    return out


async def _send(bootstrap: str, topic: str, lines: list[bytes], *, ticks: bool) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        futs = [
            await producer.send(
                topic, key=json.loads(line)["trace_id"].encode(), value=line
            )
            for line in lines
        ]
        if ticks:  # a year ahead on every partition: every session closes
            ahead = int(time.time() * 1000) + 365 * 86_400_000
            tick = {"key": TICK_KEY.encode(), "value": b"tick", "timestamp_ms": ahead}
            futs += [
                await producer.send(topic, partition=p, **tick)  # type: ignore[arg-type]
                for p in range(PARTITIONS)
            ]
        await asyncio.gather(*futs)
    finally:
        await producer.stop()


def _outputs(bootstrap: str, topic: str) -> list[Any]:
    return k.read_topic(bootstrap, topic, count=10**9, timeout=2)


def test_quix_app_restores_from_its_changelog_after_a_kill(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    lines = _sessions()
    host = TraceHost.from_policy(SIX, allow_code=True)
    data = b"".join(line + b"\n" for line in lines)
    result = grade_bytes(host.suite, data)
    want = {_ENC.encode(v) for v in result.verdicts}
    want |= {_ENC.encode(d) for d in result.decisions}
    half = len(lines) // 2
    early = _early(host, lines[:half])
    assert early and early < want

    source, sink, group = k.unique("quix-in"), k.unique("quix-out"), k.unique("quix")
    k.create_topic(kafka_bootstrap, source, PARTITIONS)
    common = [
        "--broker", kafka_bootstrap, "--input", source, "--output", sink,
        "--group", group, "--policy", str(SIX), "--allow-code",
        "--idle", str(30 * 86_400), "--commit-interval", "0.5",
        "--session-timeout-ms", "6000",
    ]  # fmt: skip
    asyncio.run(_send(kafka_bootstrap, source, lines[:half], ticks=False))
    first = QuixApp(tmp_path, "first", [*common, "--state-dir", str(tmp_path / "a")])
    try:
        k.wait_for(
            lambda: (
                early <= {r.value for r in _outputs(kafka_bootstrap, sink)}
                or first.proc.poll() is not None
            ),
            120,
            "the first half's early verdicts",
        )
    finally:
        first.stop(signal.SIGKILL)
    assert early <= {r.value for r in _outputs(kafka_bootstrap, sink)}, (
        first.err_path.read_text()[-3000:]
    )

    asyncio.run(_send(kafka_bootstrap, source, lines[half:], ticks=True))
    second = QuixApp(tmp_path, "second", [*common, "--state-dir", str(tmp_path / "b")])
    try:
        k.wait_for(
            lambda: (
                want <= {r.value for r in _outputs(kafka_bootstrap, sink)}
                or second.proc.poll() is not None
            ),
            180,
            "every verdict",
        )
    finally:
        rc = second.stop(signal.SIGTERM)
    records = _outputs(kafka_bootstrap, sink)
    log = second.err_path.read_text()
    assert {r.value for r in records} == want, log[-3000:]
    assert "Recovery" in log  # (its state came from the changelog topics)
    assert rc == 0, log[-3000:]
    by_id: dict[bytes, set[bytes]] = {}
    for r in records:
        headers = dict(r.headers)
        assert r.key == json.loads(r.value)["trace_id"].encode()
        by_id.setdefault(headers["trajgrade-id"], set()).add(r.value)
    assert all(len(values) == 1 for values in by_id.values())
    assert len(by_id) == len(want)


def test_quix_app_runs_exactly_once_on_the_test_broker(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """``exactly-once`` (Quix's transactions) runs on tansu and gives exactly
    the verdicts once each. (A crash under it cannot be tested here: tansu's
    read_committed consumers see aborted records.)"""
    lines = _sessions()[:400]
    host = TraceHost.from_policy(SIX, allow_code=True)
    result = grade_bytes(host.suite, b"".join(line + b"\n" for line in lines))
    want = [_ENC.encode(v) for v in result.verdicts]
    want += [_ENC.encode(d) for d in result.decisions]
    source, sink, group = (
        k.unique("quix-eos-in"),
        k.unique("quix-eos-out"),
        k.unique("quix-eos"),
    )
    k.create_topic(kafka_bootstrap, source, PARTITIONS)
    asyncio.run(_send(kafka_bootstrap, source, lines, ticks=True))
    app = QuixApp(
        tmp_path,
        "eos",
        [
            "--broker",
            kafka_bootstrap,
            "--input",
            source,
            "--output",
            sink,
            "--group",
            group,
            "--policy",
            str(SIX),
            "--allow-code",
            "--guarantee",
            "exactly-once",
            "--commit-interval",
            "0.5",
            "--session-timeout-ms",
            "6000",
            "--state-dir",
            str(tmp_path / "s"),
        ],
    )
    try:
        k.wait_for(
            lambda: (
                len(_outputs(kafka_bootstrap, sink)) >= len(want)
                or app.proc.poll() is not None
            ),
            120,
            "every verdict",
        )
    finally:
        rc = app.stop(signal.SIGTERM)
    got = [r.value for r in _outputs(kafka_bootstrap, sink)]
    assert sorted(got) == sorted(want), app.err_path.read_text()[-3000:]
    assert rc == 0
