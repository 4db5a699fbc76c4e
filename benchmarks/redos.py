"""ReDoS: how long catastrophic user regexes stall the stream.

A corpus of ``--traces`` traces (default 100), each one ``bash`` call whose
result is a ``--size``-character value (default 1 MB: ``a`` repeated, then
``!``) is graded by ``trajgrade grade`` as a whole process under three
policies that differ only in the ``result:`` pattern of one ``tool-calls``
grader:

* ``literal``: ``needle`` (a substring test: the baseline);
* ``re2``: ``(a+)+$``, catastrophic for a backtracking engine, which trajgrade
  runs on RE2 in linear time;
* ``backtracking``: ``^(a+)+(?=$)``, just as catastrophic, but the lookahead
  keeps it on the time-boxed backtracking engine (``--regex-timeout``, default
  0.25 s) and its circuit breaker.

The stall of a policy is its median wall time minus the baseline's. The
target (issue 15): 100 traces x a catastrophic pattern on 1 MB values stall
the stream at most 1 s in total, for both engines. Without RE2 and the
breaker, the time box alone costs 100 x 0.25 s = 25 s.

Usage: ``python benchmarks/redos.py [--traces 100] [--size 1000000] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_STALL = 1.0
PATTERNS = {
    "literal": "needle",
    "re2": "(a+)+$",
    "backtracking": "^(a+)+(?=$)",
}


def corpus(path: Path, traces: int, size: int) -> None:
    value = "a" * size + "!"
    with path.open("w") as f:
        for i in range(traces):
            tid = f"t{i:04d}"
            f.write(
                json.dumps(
                    {"type": "tool_call", "trace_id": tid, "name": "bash"}
                    | {"call_id": "c1", "args": {"command": "cat big"}}
                )
                + "\n"
            )
            f.write(
                json.dumps(
                    {"type": "tool_result", "trace_id": tid, "call_id": "c1"}
                    | {"result": value}
                )
                + "\n"
            )
            f.write(json.dumps({"type": "trace_end", "trace_id": tid}) + "\n")


def policy(path: Path, pattern: str) -> None:
    path.write_text(
        "graders:\n  - type: tool-calls\n    name: rx\n    config:\n"
        f"      required: [{{name: bash, result: {json.dumps(pattern)}}}]\n"
    )


def grade(cfg: Path, log: Path) -> tuple[float, dict[str, int]]:
    argv = [sys.executable, "-m", "trajgrade", "grade", "-q", "-c", str(cfg)]
    t0 = time.perf_counter()
    proc = subprocess.run(
        [*argv, "--output", "jsonl", str(log)],
        capture_output=True,
        check=False,
    )
    elapsed = time.perf_counter() - t0
    outcomes: dict[str, int] = {}
    for line in proc.stdout.splitlines():
        v = json.loads(line)
        if v["final"]:
            outcomes[v["outcome"]] = outcomes.get(v["outcome"], 0) + 1
    return elapsed, outcomes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", type=int, default=100)
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        log = d / "events.jsonl"
        corpus(log, args.traces, args.size)
        for name, pattern in PATTERNS.items():
            policy(d / f"{name}.yaml", pattern)
        times: dict[str, list[float]] = {name: [] for name in PATTERNS}
        outcomes: dict[str, dict[str, int]] = {}
        for _ in range(args.rounds):
            for name in PATTERNS:
                elapsed, outcomes[name] = grade(d / f"{name}.yaml", log)
                times[name].append(elapsed)
    base = statistics.median(times["literal"])
    print(
        f"{args.traces} traces x {args.size:,}-character values, "
        f"median of {args.rounds} rounds"
    )
    ok = True
    for name, pattern in PATTERNS.items():
        t = statistics.median(times[name])
        stall = t - base
        line = f"  {name:13} {pattern!r:16} {t:6.2f} s  verdicts {outcomes[name]}"
        if name != "literal":
            hit = stall <= TARGET_STALL
            ok &= hit
            line += f"  stall {stall:5.2f} s (target <= {TARGET_STALL:g} s: {'met' if hit else 'MISSED'})"
        print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
