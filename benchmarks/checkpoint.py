"""What durable state costs: batch throughput with and without ``--state``.

Runs, alternating for N rounds on the same corpus as ``run.py``,

* ``trajgrade grade -q -c benchmarks/bench.yaml --output jsonl events.jsonl``
* the same with ``--state DIR`` at the default cadence (a fresh DIR per round)
* the same with ``--state DIR --checkpoint-interval 0.25`` (a stress cadence,
  so even a short run writes many checkpoints),

as whole processes, and prints the median wall times, the overhead of each
state run against the plain run, the checkpoint size, and whether the issue's
target holds: checkpointing costs at most 10 % of batch throughput at the
default cadence. The verdict output of every run must be identical.

Usage: ``python benchmarks/checkpoint.py [--size large] [--rounds 5]``
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import CONFIG, ensure_corpus, find_shared, load_manifest

TARGET_OVERHEAD = 0.10


def grade(corpus: Path, out: Path, extra: list[str]) -> float:
    argv = [
        sys.executable,
        "-m",
        "trajgrade",
        "grade",
        "-q",
        "-c",
        str(CONFIG),
        "--output",
        "jsonl",
        *extra,
        str(corpus / "events.jsonl"),
    ]
    t0 = time.perf_counter()
    with out.open("wb") as f:
        p = subprocess.run(argv, stdout=f, stderr=subprocess.PIPE, check=False)
    elapsed = time.perf_counter() - t0
    if p.returncode not in (0, 1):
        sys.exit(f"trajgrade failed ({p.returncode}): {p.stderr.decode()[-2000:]}")
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size", default="large", choices=("small", "medium", "large"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--shared", default=None, help="path of ../shared")
    args = ap.parse_args()
    shared = find_shared(args.shared)
    corpus = ensure_corpus(shared, args.size)
    n_events = load_manifest(corpus)["n_events"]
    variants = {
        "no state": [],
        "--state (default cadence, 5 s)": ["--state", "{dir}"],
        "--state --checkpoint-interval 0.25": [
            "--state",
            "{dir}",
            "--checkpoint-interval",
            "0.25",
        ],
    }
    times: dict[str, list[float]] = {k: [] for k in variants}
    digests: dict[str, set[str]] = {k: set() for k in variants}
    sizes: list[int] = []
    with tempfile.TemporaryDirectory(prefix="tg-ckpt-bench-") as tmp:
        for rnd in range(args.rounds):
            for name, extra in variants.items():
                state = Path(tmp) / f"state-{rnd}-{len(times[name])}-{hash(name)}"
                argv = [a.replace("{dir}", str(state)) for a in extra]
                out = Path(tmp) / "out.jsonl"
                times[name].append(grade(corpus, out, argv))
                digests[name].add(hashlib.blake2b(out.read_bytes()).hexdigest())
                ckpt = state / "checkpoint.msgpack"
                if ckpt.exists():
                    sizes.append(ckpt.stat().st_size)
    base = statistics.median(times["no state"])
    print(f"corpus: {args.size} ({n_events:,} events), {args.rounds} rounds, medians")
    print(f"{'variant':<38} {'wall s':>8} {'events/s':>12} {'overhead':>9}")
    overheads = {}
    for name, ts in times.items():
        med = statistics.median(ts)
        overheads[name] = med / base - 1
        print(
            f"{name:<38} {med:>8.3f} {n_events / med:>12,.0f} {overheads[name]:>+8.1%}"
        )
    if sizes:
        print(f"final checkpoint size: {statistics.median(sizes) / 1024:,.1f} KiB")
    same = len(set().union(*digests.values())) == 1
    print(f"verdict output identical across variants: {'yes' if same else 'NO'}")
    default = overheads["--state (default cadence, 5 s)"]
    verdict = "met" if default <= TARGET_OVERHEAD else "MISSED"
    print(
        f"target: checkpoint overhead <= {TARGET_OVERHEAD:.0%} at the default cadence: "
        f"{default:+.1%} ({verdict})"
    )
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
