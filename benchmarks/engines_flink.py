"""trajgrade hosted in Flink: events/s of the Flink job against ``trajgrade grade``.

On the same events in the same run (the bench corpus's canonical events,
``--repeat`` copies under fresh trace ids):

* ``trajgrade grade -q -c benchmarks/six.yaml --allow-code`` as a process;
* the Flink job (``trajgrade.integrations.flink``, a bounded ``FileSource``)
  on the local mini-cluster in this process: the JVM's start is timed apart
  (once per process), then each round is one job;

and prints events/s of each, their ratio, the JVM start, and the bytes per
open trace in the job's state (the ``ValueState`` value, a TraceHost
snapshot, plus the 8-byte deadline), largest and mean. Every round's
verdicts must equal ``trajgrade grade``'s (the job's guard decisions, which
``grade`` prints only with ``--decisions``, are left out of the comparison).

Usage: ``python benchmarks/engines_flink.py [--repeat 4] [--rounds 3]``
(needs ``pip install 'trajgrade[flink]'`` and Java 11/17; without pyflink it
says so and exits 0).
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parents[1]
SIX = ROOT / "benchmarks" / "six.yaml"
EVENTS = ROOT / "tests" / "fixtures" / "bench" / "small_events.jsonl.gz"
DEADLINE_BYTES = 8  # (the timer's deadline, a LONG ValueState)


def corpus(repeat: int) -> bytes:
    """The bench events, ``repeat`` times under fresh trace ids."""
    lines = gzip.decompress(EVENTS.read_bytes()).splitlines()
    out = []
    for n in range(repeat):
        for line in lines:
            event = msgspec.json.decode(line)
            event["trace_id"] = f"{event['trace_id']}-{n}"
            out.append(msgspec.json.encode(event))
    return b"\n".join(out) + b"\n"


def graded_by_cli(events: Path) -> tuple[float, list[bytes]]:
    argv = [sys.executable, "-m", "trajgrade", "grade", "-q", "-c", str(SIX)]
    argv += ["--allow-code", "--output", "jsonl", str(events)]
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, check=False, timeout=600)
    took = time.perf_counter() - t0
    if done.returncode not in (0, 1):  # (1: some verdict failed)
        raise SystemExit(done.stderr.decode())
    return took, _comparable(done.stdout.splitlines())


def _comparable(lines: list[bytes]) -> list[bytes]:
    """Verdict lines, sorted, without ``source`` (where in a file a file run's
    verdict was decided: a host's records name no file)."""
    out = []
    for line in lines:
        verdict = msgspec.json.decode(line)
        verdict.pop("source", None)
        out.append(msgspec.json.encode(verdict))
    return sorted(out)


def state_bytes(data: bytes) -> tuple[int, float]:
    """Largest and mean bytes of an open trace's state, after each record."""
    from trajgrade.api import TraceHost

    host = TraceHost.from_policy(SIX, allow_code=True)
    snapshots: dict[str, bytes] = {}
    sizes = []
    for line in data.splitlines():
        tid = host.trace_id_of(line)
        assert tid is not None
        state = host.restore(snapshots[tid]) if tid in snapshots else host.open(tid)
        host.feed(state, line)
        snapshots[tid] = host.snapshot(state)
        if not state.closed:
            sizes.append(len(snapshots[tid]) + DEADLINE_BYTES)
    return max(sizes), statistics.fmean(sizes)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if importlib.util.find_spec("pyflink") is None:
        print("skipped: pyflink is not installed (pip install 'trajgrade[flink]')")
        return 0
    from pyflink.java_gateway import get_gateway

    from trajgrade.integrations.flink_job import environment, job

    data = corpus(args.repeat)
    events = data.count(b"\n")
    largest, mean = state_bytes(data)
    t0 = time.perf_counter()
    get_gateway()  # (the JVM, in which each job's mini-cluster runs)
    jvm = time.perf_counter() - t0
    cli_times, flink_times = [], []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "events.jsonl"
        path.write_bytes(data)
        for _ in range(args.rounds):
            took, want = graded_by_cli(path)
            cli_times.append(took)
            env = environment()
            stream = job(env, SIX, path, idle=timedelta(days=30), allow_code=True)
            t0 = time.perf_counter()
            with stream.execute_and_collect() as results:
                outputs = [js.encode() for _, _, js in results]
            # (grade prints verdicts; guard decisions only with --decisions)
            got = _comparable(
                [o for o in outputs if "action" not in msgspec.json.decode(o)]
            )
            flink_times.append(time.perf_counter() - t0)
            if got != want:
                raise SystemExit(
                    "the Flink job's verdicts differ from trajgrade grade's"
                )
    cli, flink = statistics.median(cli_times), statistics.median(flink_times)
    print(f"events: {events} ({args.repeat} x the bench corpus), rounds: {args.rounds}")
    print(f"JVM start (pyflink gateway, once per process): {jvm:.1f} s")
    print(f"trajgrade grade (process):  {events / cli:10.0f} events/s  ({cli:.2f} s)")
    print(
        f"Flink job (mini-cluster):   {events / flink:10.0f} events/s  ({flink:.2f} s)"
    )
    print(f"ratio Flink / grade: {cli / flink:.3f}")
    print(f"state per open trace: {largest} B largest, {mean:.0f} B mean")
    print("verdicts: identical to trajgrade grade in every round")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
