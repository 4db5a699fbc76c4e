#!/usr/bin/env python3
"""Adapter throughput: agents' own log formats against the canonical JSONL path.

For each major format (Claude Code, Codex, ATIF) a synthetic input of about
``--mb`` megabytes is built from the real recorded file in ``shared/corpus``:
line formats are the file repeated with fresh session ids; ATIF is one
document whose ``steps`` are the real steps repeated. The same events are then
written as canonical JSONL with ``trajgrade convert``, and both inputs are
graded as whole processes (``trajgrade grade`` with a tool-calls and a
token-budget grader), alternating, ``--rounds`` times. Printed per format:
events/s of each path, the ratio (target >= 0.5x), and peak RSS (target: flat,
i.e. not growing with the input size).

Usage: python benchmarks/adapters.py [--mb 100] [--rounds 3] [--shared PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
POLICY = """graders:
  - type: tool-calls
    config: {disallowed: ["^rm_rf$"], required: ["^(Read|view|bash|shell|exec_command)$"]}
  - type: token-budget
    config: {max: 1000000000}
"""
SOURCES = {
    "claude-code": "claude-code/spotter_v2.1.39_long_session.jsonl",
    "codex": "codex/agentcmd_v0.40.0_turn_aborted_123_calls.jsonl",
    "atif": "atif/atif2otel_claude-code_v1.7_pass.json",
}
# The launcher forks the child itself, so ru_maxrss is the child's alone.
LAUNCH = (
    "import os, sys, time\n"
    "t = time.perf_counter(); pid = os.fork()\n"
    "if pid == 0:\n"
    "    out = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)\n"
    "    os.dup2(out, 1); os.execv(sys.argv[2], sys.argv[2:])\n"
    "_, status, usage = os.wait4(pid, 0)\n"
    "print(time.perf_counter() - t, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status))\n"
)


def find_shared(explicit: str | None) -> Path:
    raw = explicit or os.environ.get("TRAJGRADE_SHARED")
    shared = Path(raw) if raw else REPO.parent / "shared"
    if not (shared / "corpus").is_dir():
        sys.exit(
            f"{shared}/corpus not found; pass --shared PATH or set TRAJGRADE_SHARED"
        )
    return shared


def build_lines(src: Path, dest: Path, target: int) -> None:
    """Repeat a JSONL session, giving every copy its own session id."""
    lines = src.read_bytes().splitlines()
    ids = {json.loads(line).get("sessionId") for line in lines[:50] if line.strip()}
    ids |= {
        json.loads(line).get("payload", {}).get("id")
        for line in lines[:5]
        if line.strip()
    }
    ids.discard(None)
    body = b"\n".join(lines) + b"\n"
    with dest.open("wb") as out:
        n = 0
        while out.tell() < target:
            copy = body
            for old in ids:
                copy = copy.replace(str(old).encode(), f"{old}-{n}".encode())
            out.write(copy)
            n += 1


def build_atif(src: Path, dest: Path, target: int) -> None:
    """One ATIF document whose steps are the real steps, repeated."""
    doc: dict[str, Any] = json.loads(src.read_text())
    steps = doc.pop("steps")
    head = json.dumps(doc)[:-1].encode() + b', "steps": ['
    with dest.open("wb") as out:
        out.write(head)
        n, first = 0, True
        while out.tell() < target:
            for step in steps:
                step = dict(step)
                step["step_id"] = n
                n += 1
                for call in step.get("tool_calls") or []:
                    call["tool_call_id"] = f"{call.get('tool_call_id')}-{n}"
                for res in (step.get("observation") or {}).get("results") or []:
                    res["source_call_id"] = f"{res.get('source_call_id')}-{n}"
                out.write(
                    (b"" if first else b",\n") + json.dumps(step, indent=2).encode()
                )
                first = False
        out.write(b"]}\n")


def run(cmd: list[str], out: Path) -> tuple[float, float, int]:
    proc = subprocess.run(
        [sys.executable, "-S", "-c", LAUNCH, str(out), *cmd],
        capture_output=True,
        text=True,
        check=True,
    )
    wall, rss, code = proc.stdout.split()
    return float(wall), float(rss), int(code)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--mb", type=float, default=100.0, help="size of each synthetic input"
    )
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--shared", default=None)
    args = p.parse_args()
    shared = find_shared(args.shared)
    target = int(args.mb * 1024 * 1024)
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cpus; inputs ~{args.mb:g} MB each"
    )
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        cfg = tmp / "policy.yaml"
        cfg.write_text(POLICY)
        exe = [sys.executable, "-m", "trajgrade"]
        for fmt, rel in SOURCES.items():
            src = shared / "corpus" / rel
            native = tmp / f"{fmt}.input"
            (build_atif if fmt == "atif" else build_lines)(src, native, target)
            canonical = tmp / f"{fmt}.canonical.jsonl"
            with canonical.open("wb") as out:
                subprocess.run([*exe, "convert", str(native)], stdout=out, check=True)
            with canonical.open("rb") as f:
                events = sum(1 for _ in f)
            times: dict[str, list[float]] = {"native": [], "canonical": []}
            rss: dict[str, list[float]] = {"native": [], "canonical": []}
            for _ in range(args.rounds):
                for kind, path in (("native", native), ("canonical", canonical)):
                    wall, peak, code = run(
                        [*exe, "grade", "-q", "-c", str(cfg), str(path)], tmp / "out"
                    )
                    if code not in (0, 1):
                        print(f"{fmt} {kind}: trajgrade exited {code}")
                        return 1
                    times[kind].append(wall)
                    rss[kind].append(peak)
            t_nat, t_can = (
                statistics.median(times["native"]),
                statistics.median(times["canonical"]),
            )
            print(
                f"{fmt:12s} {events:>9,} events  {native.stat().st_size / 1e6:7.1f} MB  "
                f"native {events / t_nat / 1e3:7.1f} k ev/s ({max(rss['native']):.0f} MiB)  "
                f"canonical {events / t_can / 1e3:7.1f} k ev/s ({max(rss['canonical']):.0f} MiB)  "
                f"ratio {t_can / t_nat:.2f}x (target >= 0.5x)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
