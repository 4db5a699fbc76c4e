"""Follow-mode latency: from a line appended to a file to its delivery / verdict.

Two measurements, each at fixed append rates (default 1 k and 10 k lines/s):

``source``
    A writer process appends ``<seq> <monotonic_ns>`` lines at a fixed rate;
    this process follows the file with :class:`trajgrade.sources.LiveFiles` and
    records, per line, ``now - written_at`` when the ``Data`` piece holding its
    last byte arrives. Also: the reader's CPU while following, and its CPU and
    loop-thread wakeups while idle (a followed file plus a watched directory
    of 1,000 files).

``full``
    The same writer appends canonical JSONL events while
    ``python -m trajgrade grade -q --output jsonl -c POLICY --follow FILE``
    runs as a subprocess. Every 10th event is a disallowed tool call in a new
    trace whose id carries its write time; the benchmark reads the early
    ``fail`` verdicts from the grader's stdout and records ``now - written_at``.
    The other events are benign calls on 8 long-running traces, so the grader
    sees the full event rate.

``CLOCK_MONOTONIC`` is system-wide on Linux and macOS, so the writer's
timestamps and the reader's clock compare directly.

Targets (issue 6): append → verdict p99 ≤ 5 ms at 1 k events/s and ≤ 20 ms at
10 k events/s; the source alone should deliver within 1 to 2 ms.

Usage::

    python benchmarks/follow_latency.py                 # both parts, 3 s per rate
    python benchmarks/follow_latency.py --part source --backend watchfiles
    python benchmarks/follow_latency.py --seconds 10 --rates 1000,10000,20000
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import msgspec

from trajgrade.sources import Data, LiveFiles

#: p99 targets in milliseconds for the whole pipeline, by events/s.
TARGETS = {1000: 5.0, 10000: 20.0}
#: p99 the source alone should meet (ms): a share of the pipeline budget.
SOURCE_TARGET_MS = 2.0

WRITER = textwrap.dedent(
    """
    import os, sys, time
    path, rate, seconds, mode = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    n = int(rate * seconds)
    period = 1e9 / rate
    t0 = time.monotonic_ns() + 300_000_000  # let the reader settle
    for i in range(n):
        target = t0 + int(i * period)
        now = time.monotonic_ns()
        if target - now > 60_000:
            time.sleep((target - now) / 1e9)
        ts = time.monotonic_ns()
        if mode == "source":
            line = b"%d %d\\n" % (i, ts)
        elif i % 10 == 0:
            line = (
                b'{"trace_id":"lat-%d-%d","type":"tool_call","name":"forbidden",'
                b'"call_id":"c%d","args":{"path":"x"}}\\n' % (i, ts, i)
            )
        else:
            line = (
                b'{"trace_id":"busy-%d","type":"tool_call","name":"view",'
                b'"call_id":"c%d","args":{"path":"src/app.py"}}\\n' % (i % 8, i)
            )
        os.write(fd, line)
    os.close(fd)
    """
)

POLICY = """\
graders:
  - type: tool-calls
    name: no-forbidden
    config:
      disallowed:
        - name: "^forbidden$"
"""


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


def loop_wakeups() -> int:
    """Context switches of this thread (Linux); -1 elsewhere."""
    try:
        with open("/proc/thread-self/status", encoding="ascii") as f:
            return sum(
                int(line.split(":")[1])
                for line in f
                if line.startswith(("voluntary_ctxt", "nonvoluntary_ctxt"))
            )
    except OSError:
        return -1


def start_writer(
    path: Path, rate: int, seconds: float, mode: str
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(rate), str(seconds), mode]
    )


def stop(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()


# ---------------------------------------------------------------- source


async def source_run(rate: int, seconds: float, backend: str) -> dict[str, float]:
    n = int(rate * seconds)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "agent.log"
        live = LiveFiles([str(path)], backend=backend)
        lat: list[float] = []
        partial = b""
        writer = start_writer(path, rate, seconds, "source")
        cpu0, wall0 = cpu_seconds(), time.monotonic()
        try:
            with anyio.fail_after(seconds + 30):
                async for piece in live.pieces():
                    if type(piece) is not Data:
                        continue
                    now = time.monotonic_ns()
                    lines = (partial + piece.data).split(b"\n")
                    partial = lines.pop()
                    lat.extend((now - int(ln.split(b" ")[1])) / 1e6 for ln in lines)
                    if len(lat) >= n:
                        break
        finally:
            live.close()
            stop(writer)
        busy = (cpu_seconds() - cpu0) / (time.monotonic() - wall0) * 100
    warm = lat[len(lat) // 20 :]  # drop the first 5 %: imports, page faults
    return {
        "lines": len(lat),
        "p50": percentile(warm, 0.50),
        "p99": percentile(warm, 0.99),
        "max": max(warm),
        "cpu": busy,
    }


async def idle_run(seconds: float, backend: str, files: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "sessions").mkdir()
        for i in range(files):
            sub = root / "sessions" / f"p{i % 20}"
            sub.mkdir(exist_ok=True)
            (sub / f"s{i}.jsonl").write_bytes(b"{}\n")
        followed = root / "agent.log"
        followed.write_bytes(b"x\n")
        live = LiveFiles(
            [str(followed)], [(str(root / "sessions"), "**/*.jsonl")], backend=backend
        )
        seen = 0
        ready = anyio.Event()
        result: dict[str, float] = {}

        async def pump() -> None:
            nonlocal seen
            async for _ in live.pieces():
                seen += 1
                if seen == 2 * (files + 1):  # Opened + Data per file
                    ready.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(pump)
            with anyio.fail_after(30):
                await ready.wait()
            await anyio.sleep(0.5)
            cpu0, wall0, wake0 = cpu_seconds(), time.monotonic(), loop_wakeups()
            await anyio.sleep(seconds)
            wall = time.monotonic() - wall0
            result["cpu"] = (cpu_seconds() - cpu0) / wall * 100
            result["wakeups"] = (loop_wakeups() - wake0) / wall
            tg.cancel_scope.cancel()
        live.close()
    return result


# ---------------------------------------------------------------- full


async def full_run(rate: int, seconds: float) -> dict[str, float]:
    n_fail = len(range(0, int(rate * seconds), 10))
    decoder = msgspec.json.Decoder()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "agent.jsonl"
        path.write_bytes(b"")
        policy = Path(tmp) / "policy.yaml"
        policy.write_text(POLICY, encoding="utf-8")
        grader = await anyio.open_process(
            [
                sys.executable,
                "-m",
                "trajgrade",
                "grade",
                "-q",
                "--output",
                "jsonl",
                "--idle-timeout",
                "0",
                "-c",
                str(policy),
                "--follow",
                str(path),
            ],
            stdin=subprocess.DEVNULL,
            stderr=None,
        )
        lat: list[float] = []
        writer: subprocess.Popen[bytes] | None = None
        try:
            assert grader.stdout is not None
            await anyio.sleep(1.0)  # start-up: imports, config, first open
            writer = start_writer(path, rate, seconds, "full")
            partial = b""
            with anyio.fail_after(seconds + 30):
                async for chunk in grader.stdout:
                    now = time.monotonic_ns()
                    lines = (partial + chunk).split(b"\n")
                    partial = lines.pop()
                    for line in lines:
                        verdict = decoder.decode(line)
                        trace = verdict["trace_id"]
                        if trace.startswith("lat-") and verdict["outcome"] == "fail":
                            lat.append((now - int(trace.split("-")[2])) / 1e6)
                    if len(lat) >= n_fail:
                        break
        finally:
            if writer is not None:
                stop(writer)
            if grader.returncode is None:
                grader.kill()
            await grader.wait()
    warm = lat[len(lat) // 20 :]
    return {
        "verdicts": len(lat),
        "p50": percentile(warm, 0.50),
        "p99": percentile(warm, 0.99),
        "max": max(warm),
    }


# ---------------------------------------------------------------- main


def verdict(p99: float, target: float) -> str:
    return f"{'PASS' if p99 <= target else 'MISS'} ({p99 / target:.2f}x target)"


async def main(args: argparse.Namespace) -> None:
    rates = [int(r) for r in args.rates.split(",")]
    backends = ["inotify", "watchfiles"] if args.backend == "all" else [args.backend]
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {sys.platform}")
    if args.part in ("source", "both"):
        print("\n== source: append -> LiveFiles Data piece ==")
        for backend in backends:
            for rate in rates:
                r = await source_run(rate, args.seconds, backend)
                print(
                    f"{backend:10} {rate:>6}/s  lines {r['lines']:>6}  "
                    f"p50 {r['p50']:6.3f} ms  p99 {r['p99']:6.3f} ms  "
                    f"max {r['max']:7.3f} ms  reader CPU {r['cpu']:5.1f} %  "
                    f"p99 {verdict(r['p99'], SOURCE_TARGET_MS)}"
                )
            for files in (0, 1000):
                idle = await idle_run(args.idle_seconds, backend, files)
                print(
                    f"{backend:10} idle, 1 followed file + {files:,} watched files: "
                    f"CPU {idle['cpu']:.2f} %, loop wakeups {idle['wakeups']:.1f}/s"
                )
    if args.part in ("full", "both"):
        print(
            "\n== full: append -> early fail verdict on `trajgrade grade --follow` stdout =="
        )
        for rate in rates:
            r = await full_run(rate, args.seconds)
            target = TARGETS.get(rate)
            judged = verdict(r["p99"], target) if target else "(no target)"
            print(
                f"{rate:>6} events/s  verdicts {r['verdicts']:>5}  "
                f"p50 {r['p50']:6.3f} ms  p99 {r['p99']:6.3f} ms  "
                f"max {r['max']:7.3f} ms  target p99 <= {target} ms: {judged}"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=["source", "full", "both"], default="both")
    parser.add_argument("--rates", default="1000,10000")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--idle-seconds", type=float, default=5.0)
    parser.add_argument(
        "--backend", choices=["inotify", "watchfiles", "poll", "all"], default="all"
    )
    anyio.run(main, parser.parse_args())
