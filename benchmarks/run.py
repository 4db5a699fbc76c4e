"""Benchmark harness: trajgrade against the decode floors, as whole processes.

For each corpus size this runs, alternating for N rounds,

* ``python -m trajgrade grade -q -c benchmarks/bench.yaml --output jsonl``,
* ``../shared/bench/floor.py --mode msgspec_struct`` (typed decode, no grading),
* ``../shared/bench/floor.py --mode stream_ref`` (decode + a naive streaming
  grader of the same checks),

all with this interpreter, and measures each child's wall time and peak RSS
(``os.wait4``: that child's own resource usage). trajgrade's pass counts per
grader are checked against the ``stream_ref`` floor's in the same run.

Corpora come from ``../shared/bench/gen_traces.py`` and are cached in
``benchmarks/.corpus/<size>/`` (reused when ``manifest.json`` exists).

Exit status: 0 when every child ran and the verdict counts agree (missed
performance targets are reported, never fatal); 1 when a child crashed or the
counts disagree; 2 when the setup is broken (no shared dir, generator failed).

Usage: ``python benchmarks/run.py [--sizes medium large] [--rounds 3] [--json PATH]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BENCH_DIR = REPO / "benchmarks"
CONFIG = BENCH_DIR / "bench.yaml"
CORPUS_CACHE = BENCH_DIR / ".corpus"
SIZES = ("small", "medium", "large")
DEFAULT_SIZES = ("medium", "large")

TRAJGRADE = "trajgrade"
MSGSPEC = "msgspec_struct"
STREAM_REF = "stream_ref"
PROGRAMS = (TRAJGRADE, MSGSPEC, STREAM_REF)
# the graders in bench.yaml, named after the stream_ref floor's checks
CHECKS = ("in_order", "forbidden", "arg_regex")

TARGET_RATIO = 0.5  # trajgrade events/s >= 0.5x the msgspec_struct floor, on large
TARGET_RSS_MIB = 60.0  # trajgrade peak RSS on large
TARGET_SIZE = "large"
RSS_FLAT_TOLERANCE_MIB = 5.0  # medium -> large growth still called flat


class SetupError(Exception):
    """The benchmark cannot start (missing shared dir, generator failed...)."""


# --------------------------------------------------------------------------- #
# Data
# --------------------------------------------------------------------------- #


@dataclass
class Run:
    """One child process: what ran and what it cost."""

    program: str
    round: int
    wall_s: float
    peak_rss_mib: float
    exit_code: int
    ok: bool
    stderr_tail: str = ""


@dataclass
class Summary:
    """Medians (and ranges) of one program's rounds on one corpus."""

    rounds: int
    wall_s_median: float
    wall_s_min: float
    wall_s_max: float
    events_per_s: float
    peak_rss_mib_median: float
    peak_rss_mib_max: float


@dataclass
class SizeReport:
    """Everything measured on one corpus size."""

    size: str
    corpus: str
    n_events: int
    n_traces: int
    events_bytes: int
    runs: list[Run] = field(default_factory=list)
    summary: dict[str, Summary] = field(default_factory=dict)
    ratios: dict[str, float | None] = field(default_factory=dict)
    trajgrade_pass_counts: list[dict[str, int]] = field(default_factory=list)
    reference_pass_counts: dict[str, int] = field(default_factory=dict)
    counts_agree: bool = False
    crashed: bool = False


# --------------------------------------------------------------------------- #
# Setup: shared dir, corpora
# --------------------------------------------------------------------------- #


def find_shared(explicit: str | None) -> Path:
    """``--shared``, else ``$TRAJGRADE_SHARED``, else ``<repo>/../shared``."""
    raw = explicit or os.environ.get("TRAJGRADE_SHARED")
    shared = Path(raw).expanduser() if raw else REPO.parent / "shared"
    bench = shared / "bench"
    for name in ("gen_traces.py", "floor.py", "common.py"):
        if not (bench / name).is_file():
            msg = (
                f"{bench / name} not found; pass --shared PATH or set TRAJGRADE_SHARED"
            )
            raise SetupError(msg)
    return shared.resolve()


def ensure_corpus(shared: Path, size: str) -> Path:
    """Return the cached corpus dir for ``size``, generating it when missing."""
    target = CORPUS_CACHE / size
    if (target / "manifest.json").is_file() and (target / "events.jsonl").is_file():
        return target
    CORPUS_CACHE.mkdir(parents=True, exist_ok=True)
    print(f"generating the {size} corpus into {target} ...", flush=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=CORPUS_CACHE, prefix=f".gen-{size}-") as tmp:
        cmd = [
            sys.executable,
            str(shared / "bench" / "gen_traces.py"),
            *("--size", size, "--out", tmp, "--no-peer-formats"),
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            msg = f"gen_traces.py exited {done.returncode}:\n{done.stderr[-2000:]}"
            raise SetupError(msg)
        if target.exists():  # a partial earlier attempt (no manifest)
            shutil.rmtree(target)
        os.replace(Path(tmp) / size, target)
    print(f"  done in {time.perf_counter() - t0:.1f} s", flush=True)
    return target


def load_manifest(corpus: Path) -> dict[str, Any]:
    with (corpus / "manifest.json").open() as f:
        doc: dict[str, Any] = json.load(f)
    return doc


def warm_page_cache(path: Path) -> None:
    """Read the file once so the first timed child does not pay for the disk."""
    buf = bytearray(1 << 20)  # small: this process's RSS leaks into children's
    with path.open("rb") as f:
        while f.readinto(buf):
            pass


# --------------------------------------------------------------------------- #
# Running children
# --------------------------------------------------------------------------- #


def command(program: str, shared: Path, corpus: Path, out: Path) -> list[str]:
    """The argv of one program; ``out`` is where its result lands."""
    if program == TRAJGRADE:
        events = str(corpus / "events.jsonl")
        return [
            sys.executable,
            *("-m", "trajgrade", "grade", "-q", "-c", str(CONFIG)),
            *("--output", "jsonl", events),
        ]
    floor = str(shared / "bench" / "floor.py")
    return [
        sys.executable,
        *(floor, "--mode", program, "--corpus", str(corpus), "--out", str(out)),
    ]


# Forks the measured program, waits for it with os.wait4 and writes
# "wall_seconds maxrss_kib wait_status" to the file named in argv[1].
LAUNCHER = """\
import os, sys, time
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execv(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter() - t0
with open(sys.argv[1], "w") as f:
    f.write(f"{wall!r} {usage.ru_maxrss} {status}")
"""


def run_child(argv: list[str], stdout: Path, stderr: Path) -> tuple[float, float, int]:
    """Run one child; return (wall seconds, peak RSS MiB, exit code).

    The child is forked by a bare launcher (``python -S``, a few MiB) rather
    than by this process: Linux carries the pre-exec address space's
    high-water RSS into the child's ``ru_maxrss``, and ``subprocess`` uses
    vfork, so a child started from here would report at least this
    harness's own peak (a fork: its current RSS). The launcher's wall time
    starts at the fork, so its own start-up is not counted.
    """
    result = stdout.with_name(stdout.name + ".rusage")
    result.unlink(missing_ok=True)
    launcher = [sys.executable, "-S", "-c", LAUNCHER, str(result), *argv]
    with stdout.open("wb") as out, stderr.open("wb") as err:
        proc = subprocess.run(
            launcher,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            cwd=REPO,
            check=False,
        )
    if proc.returncode != 0 or not result.is_file():
        return 0.0, 0.0, proc.returncode or -1
    wall, maxrss_kib, status = result.read_text().split()
    # ru_maxrss is KiB on Linux; it is the child's own (the programs fork nothing)
    return float(wall), int(maxrss_kib) / 1024.0, os.waitstatus_to_exitcode(int(status))


def interpreter_baseline(rounds: int) -> dict[str, float]:
    """``python -c pass`` the same way: the fixed cost in every figure."""
    walls: list[float] = []
    rss: list[float] = []
    with tempfile.TemporaryDirectory(prefix="trajgrade-bench-") as tmp:
        out, err = Path(tmp) / "out", Path(tmp) / "err"
        for _ in range(rounds):
            wall, peak, _code = run_child([sys.executable, "-c", "pass"], out, err)
            walls.append(wall)
            rss.append(peak)
    return {"wall_s": statistics.median(walls), "peak_rss_mib": statistics.median(rss)}


def child_ok(program: str, code: int) -> bool:
    """trajgrade exits 1 when a verdict failed (expected here); floors exit 0."""
    return code in (0, 1) if program == TRAJGRADE else code == 0


def tail(path: Path, limit: int = 2000) -> str:
    return path.read_text(errors="replace")[-limit:] if path.exists() else ""


def output_path(tmp: Path, program: str, rnd: int) -> Path:
    suffix = "jsonl" if program == TRAJGRADE else "json"
    return tmp / f"{program}-{rnd}.{suffix}"


def run_rounds(report: SizeReport, shared: Path, rounds: int, tmp: Path) -> None:
    """A B C A B C ...: interleaved so drift on the machine hits all alike."""
    corpus = Path(report.corpus)
    for rnd in range(1, rounds + 1):
        for program in PROGRAMS:
            out = output_path(tmp, program, rnd)
            stdout = out if program == TRAJGRADE else tmp / f"{program}-{rnd}.stdout"
            stderr = tmp / f"{program}-{rnd}.stderr"
            argv = command(program, shared, corpus, out)
            wall, rss, code = run_child(argv, stdout, stderr)
            ok = child_ok(program, code)
            run = Run(program, rnd, wall, rss, code, ok, "" if ok else tail(stderr))
            report.runs.append(run)
            print(
                f"  {report.size} round {rnd} {program:<15} {wall:7.2f} s "
                f"{rss:7.1f} MiB  exit {code}{'' if ok else '  CRASHED'}",
                flush=True,
            )
            if not ok:
                report.crashed = True


# --------------------------------------------------------------------------- #
# Verdicts
# --------------------------------------------------------------------------- #


def trajgrade_pass_counts(path: Path) -> dict[str, int]:
    """Final verdicts with outcome "pass", per grader."""
    counts: Counter[str] = Counter()
    with path.open("rb") as f:
        for line in f:
            if not line.strip():
                continue
            verdict = json.loads(line)
            if verdict.get("final") and verdict.get("outcome") == "pass":
                counts[verdict["grader"]] += 1
    return {check: counts.get(check, 0) for check in CHECKS}


def reference_pass_counts(path: Path) -> dict[str, int]:
    with path.open() as f:
        doc = json.load(f)
    return {check: int(doc["pass_counts"][check]) for check in CHECKS}


def check_verdicts(report: SizeReport, tmp: Path) -> None:
    """Compare every trajgrade round with the stream_ref floor's pass counts."""
    refs = [
        reference_pass_counts(p)
        for r in range(1, _rounds(report) + 1)
        if (p := output_path(tmp, STREAM_REF, r)).is_file()
    ]
    ours = [
        trajgrade_pass_counts(output_path(tmp, TRAJGRADE, run.round))
        for run in report.runs
        if run.program == TRAJGRADE and run.ok
    ]
    report.trajgrade_pass_counts = ours
    report.reference_pass_counts = refs[0] if refs else {}
    same_refs = all(r == refs[0] for r in refs)
    report.counts_agree = (
        bool(refs and ours) and same_refs and all(o == refs[0] for o in ours)
    )


def _rounds(report: SizeReport) -> int:
    return max((run.round for run in report.runs), default=0)


# --------------------------------------------------------------------------- #
# Figures
# --------------------------------------------------------------------------- #


def summarise(report: SizeReport) -> None:
    for program in PROGRAMS:
        runs = [r for r in report.runs if r.program == program and r.ok]
        if not runs:
            continue
        walls = [r.wall_s for r in runs]
        rss = [r.peak_rss_mib for r in runs]
        median_wall = statistics.median(walls)
        report.summary[program] = Summary(
            rounds=len(runs),
            wall_s_median=median_wall,
            wall_s_min=min(walls),
            wall_s_max=max(walls),
            events_per_s=report.n_events / median_wall,
            peak_rss_mib_median=statistics.median(rss),
            peak_rss_mib_max=max(rss),
        )
    for floor in (MSGSPEC, STREAM_REF):
        report.ratios[f"vs_{floor}"] = ratio(report, floor)


def ratio(report: SizeReport, floor: str) -> float | None:
    ours, base = report.summary.get(TRAJGRADE), report.summary.get(floor)
    if ours is None or base is None:
        return None
    return ours.events_per_s / base.events_per_s


def targets(reports: dict[str, SizeReport]) -> dict[str, Any]:
    """The two targets on large, and whether trajgrade's RSS is flat."""
    large = reports.get(TARGET_SIZE)
    speed = large.ratios.get(f"vs_{MSGSPEC}") if large else None
    ours = large.summary.get(TRAJGRADE) if large else None
    rss = ours.peak_rss_mib_median if ours else None
    return {
        "ratio_vs_msgspec_large": speed,
        "ratio_target": TARGET_RATIO,
        "ratio_met": None if speed is None else speed >= TARGET_RATIO,
        "peak_rss_mib_large": rss,
        "rss_target_mib": TARGET_RSS_MIB,
        "rss_met": None if rss is None else rss <= TARGET_RSS_MIB,
        "rss_growth_mib_medium_to_large": rss_growth(reports),
    }


def rss_growth(reports: dict[str, SizeReport]) -> float | None:
    """trajgrade's median peak RSS on large minus medium (flat: close to 0)."""
    sums = [
        reports[s].summary.get(TRAJGRADE) if s in reports else None
        for s in ("medium", "large")
    ]
    if sums[0] is None or sums[1] is None:
        return None
    return sums[1].peak_rss_mib_median - sums[0].peak_rss_mib_median


# --------------------------------------------------------------------------- #
# Printing
# --------------------------------------------------------------------------- #


def machine_facts() -> dict[str, Any]:
    try:
        affinity: int | None = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = None
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": affinity,
        "platform": platform.platform(),
        "trajgrade": _version("trajgrade"),
        "msgspec": _version("msgspec"),
        "executable": sys.executable,
    }


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def print_facts(facts: dict[str, Any]) -> None:
    print(
        f"machine: python {facts['python']} ({facts['implementation']}), "
        f"{facts['cpu_count']} cpus ({facts['cpus_usable']} usable), {facts['platform']}; "
        f"trajgrade {facts['trajgrade']}, msgspec {facts['msgspec']}",
        flush=True,
    )


def print_table(report: SizeReport) -> None:
    print()
    print(
        f"== {report.size}: {report.n_events:,} events, {report.n_traces:,} traces, "
        f"{report.events_bytes / 1e6:.1f} MB (medians of {_rounds(report)} round(s); "
        "whole process incl. interpreter start)"
    )
    header = f"{'program':<24} {'wall s (min-max)':>22} {'events/s':>11} {'peak RSS MiB':>13}"
    print(header)
    print("-" * len(header))
    for program in PROGRAMS:
        s = report.summary.get(program)
        label = program if program == TRAJGRADE else f"floor {program}"
        if s is None:
            print(f"{label:<24} {'(no successful run)':>22}")
            continue
        wall = f"{s.wall_s_median:.2f} ({s.wall_s_min:.2f}-{s.wall_s_max:.2f})"
        print(
            f"{label:<24} {wall:>22} {s.events_per_s / 1e3:>9.0f} k "
            f"{s.peak_rss_mib_median:>13.1f}"
        )
    for floor in (MSGSPEC, STREAM_REF):
        value = report.ratios.get(f"vs_{floor}")
        shown = "n/a" if value is None else f"{value:.2f}x"
        print(f"trajgrade events/s / {floor} floor events/s: {shown}")
    print_agreement(report)


def print_agreement(report: SizeReport) -> None:
    ref = report.reference_pass_counts
    ours = report.trajgrade_pass_counts[0] if report.trajgrade_pass_counts else {}
    mark = "\u2713" if report.counts_agree else "\u2717"
    parts = [
        f"{c} {ours.get(c, '?')}/{ref.get(c, '?')}{'' if ours.get(c) == ref.get(c) else ' (differs)'}"
        for c in CHECKS
    ]
    print(f"verdicts {mark} trajgrade/stream_ref pass counts: {', '.join(parts)}")
    if len({tuple(sorted(c.items())) for c in report.trajgrade_pass_counts}) > 1:
        print(f"  trajgrade rounds differ: {report.trajgrade_pass_counts}")
    for run in report.runs:
        if not run.ok:
            print(f"  {run.program} round {run.round} exited {run.exit_code}:")
            print("    " + run.stderr_tail.strip().replace("\n", "\n    "))


def met(flag: bool | None) -> str:
    return "not measured" if flag is None else ("met" if flag else "NOT MET")


def print_targets(t: dict[str, Any]) -> None:
    print()
    print("== targets")
    speed, rss = t["ratio_vs_msgspec_large"], t["peak_rss_mib_large"]
    speed_s = "" if speed is None else f" ({speed:.2f}x)"
    rss_s = "" if rss is None else f" ({rss:.1f} MiB)"
    print(
        f"trajgrade >= {TARGET_RATIO}x msgspec floor on large: {met(t['ratio_met'])}{speed_s}"
    )
    print(
        f"trajgrade peak RSS <= {TARGET_RSS_MIB:.0f} MiB on large: {met(t['rss_met'])}{rss_s}"
    )
    growth = t["rss_growth_mib_medium_to_large"]
    if growth is None:
        print("RSS flat medium -> large: not measured (needs both sizes)")
    else:
        verdict = "flat" if abs(growth) <= RSS_FLAT_TOLERANCE_MIB else "GROWS"
        print(f"RSS flat medium -> large: {verdict} ({growth:+.1f} MiB)")


# --------------------------------------------------------------------------- #
# Main
# --------------------------------------------------------------------------- #


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--sizes",
        nargs="+",
        default=list(DEFAULT_SIZES),
        help="corpus sizes, space or comma separated: small, medium, large (default: medium large)",
    )
    p.add_argument(
        "--rounds", type=int, default=3, help="rounds per program (default: 3)"
    )
    p.add_argument(
        "--shared",
        default=None,
        help="the shared dir (default: $TRAJGRADE_SHARED or <repo>/../shared)",
    )
    p.add_argument(
        "--json",
        dest="json_path",
        default=None,
        help="also write all figures to this JSON file",
    )
    args = p.parse_args(argv)
    sizes = [s for item in args.sizes for s in item.split(",") if s]
    unknown = sorted(set(sizes) - set(SIZES))
    if unknown:
        p.error(f"unknown size(s) {unknown}; choose from {list(SIZES)}")
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    args.sizes = sorted(set(sizes), key=SIZES.index)
    return args


def preflight() -> None:
    for module in ("trajgrade", "msgspec"):
        if _version(module) is None:
            msg = f"{module} is not installed for {sys.executable}; run with the project's venv"
            raise SetupError(msg)
    # An installed wheel ships bytecode; an editable install under
    # PYTHONDONTWRITEBYTECODE would recompile trajgrade in every timed run.
    import trajgrade

    package = Path(trajgrade.__file__).parent
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(package)],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def bench_size(size: str, shared: Path, rounds: int) -> SizeReport:
    corpus = ensure_corpus(shared, size)
    manifest = load_manifest(corpus)
    report = SizeReport(
        size=size,
        corpus=str(corpus),
        n_events=int(manifest["n_events"]),
        n_traces=int(manifest["n_traces"]),
        events_bytes=int(manifest.get("events_bytes", 0)),
    )
    warm_page_cache(corpus / "events.jsonl")
    with tempfile.TemporaryDirectory(prefix=f"trajgrade-bench-{size}-") as tmp:
        run_rounds(report, shared, rounds, Path(tmp))
        check_verdicts(report, Path(tmp))
    summarise(report)
    return report


def write_json(
    path: str, facts: dict[str, Any], reports: dict[str, SizeReport], t: dict[str, Any]
) -> None:
    doc = {
        "machine": facts,
        "config": str(CONFIG),
        "sizes": {size: asdict(r) for size, r in reports.items()},
        "targets": t,
    }
    Path(path).write_text(json.dumps(doc, indent=1) + "\n")
    print(f"\nwrote {path}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    facts = machine_facts()
    print_facts(facts)
    facts["interpreter_start"] = base = interpreter_baseline(args.rounds)
    print(
        f"interpreter start (python -c pass, in every figure below): "
        f"{base['wall_s']:.3f} s, {base['peak_rss_mib']:.1f} MiB",
        flush=True,
    )
    try:
        preflight()
        shared = find_shared(args.shared)
        reports: dict[str, SizeReport] = {}
        for size in args.sizes:
            reports[size] = bench_size(size, shared, args.rounds)
    except SetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for report in reports.values():
        print_table(report)
    t = targets(reports)
    print_targets(t)
    if args.json_path:
        write_json(args.json_path, facts, reports, t)
    bad = [r.size for r in reports.values() if r.crashed or not r.counts_agree]
    if bad:
        print(
            f"\nFAILED on {', '.join(bad)}: a child crashed or the verdict counts disagree"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
