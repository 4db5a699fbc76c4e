"""Memory per open trace: trajgrade holding N traces open at once.

Two canonical JSONL inputs with the same events (each trace: a turn, a
``view`` call and its result, usage, then a ``bash`` call and its result and
``trace_end``):

* ``open``: every trace gets its first four events before any trace ends, so
  N traces are open at once;
* ``sequential``: trace after trace, so one trace is open at a time.

Both are graded as whole processes with ``six.yaml`` (all six shared checks),
alternating, ``--rounds`` times. Printed: peak RSS of each, CPU and wall time,
and (open - sequential peak RSS) / N, the bytes one open trace costs: per-trace
grader state, the engine's per-trace record and the garbage collector's view
of them. Targets (issue "Engine speed"): <= 1 KB per open trace, and 100 k open
traces in <= 150 MiB peak.

With ``--running-tool`` each trace's ``bash`` call comes before the pause,
so every open trace waits for a tool's result (one open call), as a
session does while its tool runs. With ``--unended`` the open input stops
after the first parts: the end of input closes all N traces at once (what
a run that stops with its sessions still open does).

Usage: python benchmarks/open_traces.py [--traces 100000] [--rounds 3] [--running-tool] [--unended]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _procs import Cost, run_child

REPO = Path(__file__).resolve().parent.parent
SIX = REPO / "benchmarks" / "six.yaml"
TARGET_BYTES = 1024
TARGET_PEAK_MIB = 150.0
_ENC = msgspec.json.Encoder()


def head(i: int) -> list[dict[str, object]]:
    t, ts = f"tr-{i:07d}", 1_767_225_600.0 + i * 0.001
    return [
        {"trace_id": t, "type": "turn_start", "step": 0, "ts": ts},
        {
            "trace_id": t,
            "type": "tool_call",
            "name": "view",
            "args": {"path": f"src/app/m{i % 97}.py"},
            "call_id": f"c{i}-1",
            "ts": ts + 0.1,
        },
        {
            "trace_id": t,
            "type": "tool_result",
            "name": "view",
            "call_id": f"c{i}-1",
            "result": "x = 1\n" * 8,
            "ts": ts + 0.2,
        },
        {
            "trace_id": t,
            "type": "usage",
            "tokens": {"input": 900, "output": 40},
            "ts": ts + 0.3,
        },
    ]


def tail(i: int) -> list[dict[str, object]]:
    t, ts = f"tr-{i:07d}", 1_767_230_000.0 + i * 0.001
    return [
        {
            "trace_id": t,
            "type": "tool_call",
            "name": "bash",
            "args": {"command": "python -m pytest -q"},
            "call_id": f"c{i}-2",
            "ts": ts,
        },
        {
            "trace_id": t,
            "type": "tool_result",
            "name": "bash",
            "call_id": f"c{i}-2",
            "result": "1 passed",
            "ts": ts + 0.1,
        },
        {"trace_id": t, "type": "trace_end", "ts": ts + 0.2},
    ]


def write(
    path: Path,
    n: int,
    *,
    interleaved: bool,
    running: bool = False,
    unended: bool = False,
) -> int:
    """``running``: each trace's ``bash`` call is in its first part, so every
    open trace waits for a running tool (one open call id). ``unended``: the
    open input stops after the first parts; the end of input closes them."""
    cut = 5 if running else 4

    def trace(i: int) -> list[dict[str, object]]:
        return head(i) + tail(i)

    events = 0
    with path.open("wb") as f:
        if interleaved:
            parts = [trace(i)[:cut] for i in range(n)]
            if not unended:
                parts += [trace(i)[cut:] for i in range(n)]
        else:
            parts = [trace(i) for i in range(n)]
        for part in parts:
            for ev in part:
                f.write(_ENC.encode(ev) + b"\n")
                events += 1
    return events


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--traces", type=int, default=100_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument(
        "--running-tool",
        action="store_true",
        help="every open trace waits for a tool's result (its call is open)",
    )
    p.add_argument(
        "--unended",
        action="store_true",
        help="the open traces never end: the end of input closes them all",
    )
    args = p.parse_args()
    n = args.traces
    with tempfile.TemporaryDirectory(prefix="trajgrade-open-") as tmp_s:
        tmp = Path(tmp_s)
        inputs = {
            "open": tmp / "open.jsonl",
            "sequential": tmp / "sequential.jsonl",
        }
        counts = {}
        counts["open"] = events = write(
            inputs["open"],
            n,
            interleaved=True,
            running=args.running_tool,
            unended=args.unended,
        )
        counts["sequential"] = write(inputs["sequential"], n, interleaved=False)
        costs: dict[str, list[Cost]] = {k: [] for k in inputs}
        for _ in range(args.rounds):
            for kind, path in inputs.items():
                argv = [
                    sys.executable,
                    *("-m", "trajgrade", "grade", "-q", "--allow-code"),
                    *("-c", str(SIX), "--output", "jsonl", str(path)),
                ]
                cost = run_child(argv, tmp / "out", tmp / "err", REPO)
                if cost.exit_code not in (0, 1):
                    print(f"{kind}: trajgrade exited {cost.exit_code}")
                    print((tmp / "err").read_text()[-2000:])
                    return 1
                costs[kind].append(cost)
    waiting = ", each waiting for a tool" if args.running_tool else ""
    waiting += ", closed by the end of input" if args.unended else ""
    print(
        f"{n:,} traces{waiting}, {events:,} events in the open input, six.yaml; "
        f"medians of {args.rounds}"
    )
    peak: dict[str, float] = {}
    for kind, runs in costs.items():
        peak[kind] = statistics.median(c.peak_rss_mib for c in runs)
        wall = statistics.median(c.wall_s for c in runs)
        cpu = statistics.median(c.cpu_s for c in runs)
        print(
            f"  {kind:<10} peak RSS {peak[kind]:7.1f} MiB  wall {wall:6.2f} s  "
            f"cpu {cpu:6.2f} s  {counts[kind] / cpu / 1e3:6.0f} k events/cpu-s"
        )
    per_trace = (peak["open"] - peak["sequential"]) * 1024 * 1024 / n
    ok_bytes = "met" if per_trace <= TARGET_BYTES else "NOT MET"
    print(
        f"per open trace: {per_trace:,.0f} bytes (target <= {TARGET_BYTES}: {ok_bytes})"
    )
    if n >= 100_000:
        ok_peak = "met" if peak["open"] <= TARGET_PEAK_MIB else "NOT MET"
        print(
            f"peak RSS with {n:,} open: {peak['open']:.1f} MiB (target <= {TARGET_PEAK_MIB:.0f}: {ok_peak})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
