"""Follow-mode throughput: events per second through ``grade --follow``, with
and without ``--state`` (the cost of durability for a followed log).

A writer appends a canonical JSONL corpus (benign calls on long-running
traces) to a file as fast as it can, in 64 KiB writes, while
``python -m trajgrade grade -q --output jsonl --follow FILE`` runs on it; the
last event is a disallowed call in a trace of its own, whose early ``fail``
verdict tells that every event before it was graded. The figure is
``events / (t_last_verdict - t_first_write)``; the start-up is not in it
(the grader is running, and its first verdict seen, before the writer
starts).

Run: python benchmarks/follow_throughput.py [--events 200000] [--rounds 3]
     [--python PY --src DIR]   # another tree's code, e.g. an older commit
Prints the median events/s per mode over interleaved rounds, and the load;
asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

POLICY = """\
graders:
  - type: tool-calls
    name: no-forbidden
    config:
      disallowed:
        - name: "^forbidden$"
  - type: tool-call-count
    config: {max: 100000000}
"""

#: Long-running traces the benign calls are spread over.
TRACES = 64


def corpus(events: int) -> bytes:
    """``events`` benign calls, then the one forbidden call."""
    lines = [
        b'{"trace_id":"busy-%d","type":"tool_call","name":"view",'
        b'"call_id":"c%d","args":{"path":"src/app.py"}}\n' % (i % TRACES, i)
        for i in range(events)
    ]
    lines.append(
        b'{"trace_id":"last","type":"tool_call","name":"forbidden",'
        b'"call_id":"z","args":{"path":"x"}}\n'
    )
    return b"".join(lines)


def one_run(
    python: str, env: dict[str, str], data: bytes, events: int, state: bool
) -> float:
    """events/s of one follower over one growing file."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "p.yaml").write_text(POLICY)
        log = root / "events.jsonl"
        # A first forbidden call: its verdict says the follower is reading.
        log.write_bytes(
            b'{"trace_id":"first","type":"tool_call","name":"forbidden",'
            b'"call_id":"a","args":{"path":"x"}}\n'
        )
        args = [python, "-m", "trajgrade", "grade", "-q", "--output", "jsonl"]
        args += ["-c", str(root / "p.yaml"), "--follow", str(log)]
        if state:
            args += ["--state", str(root / "state")]
        proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        )
        assert proc.stdout is not None
        try:
            first = proc.stdout.readline()
            if b'"first"' not in first:
                raise SystemExit(f"the follower did not start: {first!r}")
            t0 = time.perf_counter()
            with open(log, "ab", buffering=0) as out:
                out.writelines(
                    data[at : at + 65536] for at in range(0, len(data), 65536)
                )
            for line in proc.stdout:
                if b'"last"' in line:
                    return events / (time.perf_counter() - t0)
            raise SystemExit("the follower ended before the last verdict")
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument(
        "--src", action="append", default=[], help="also a tree's src/ (repeatable)"
    )
    ns = ap.parse_args()
    data = corpus(ns.events)
    trees: dict[str, dict[str, str]] = {"this tree": dict(os.environ)}
    for src in ns.src:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([src, env.get("PYTHONPATH", "")])
        trees[src] = env
    figures: dict[tuple[str, bool], list[float]] = {}
    for _ in range(ns.rounds):  # interleaved: every tree and mode each round
        for name, env in trees.items():
            for state in (False, True):
                rate = one_run(ns.python, env, data, ns.events, state)
                figures.setdefault((name, state), []).append(rate)
    print(f"load average before the last round: {os.getloadavg()[0]:.2f}")
    for (name, state), rates in figures.items():
        mode = "--follow --state" if state else "--follow        "
        print(
            f"{name:<28} {mode}  median {statistics.median(rates):>9,.0f} events/s "
            f"(min {min(rates):,.0f}, max {max(rates):,.0f}, {len(rates)} rounds, "
            f"{ns.events:,} events)",
            flush=True,
        )


if __name__ == "__main__":
    main()
