"""``grade --follow --state`` killed at random points while an agent writes its
log, and while the log is rotated under it: restarted with the same arguments
each time, the runs together write what one uninterrupted batch run writes.

Real ``python -m trajgrade`` processes, SIGKILL, SIGTERM and SIGINT at
moments hypothesis draws; a writer thread appends the log in chunks that cut
lines anywhere, and rotates it (rename, new file) at a line end. The promise
checked (docs/live.md, "Durable state"): every final verdict equal to the
uninterrupted run's, no verdict that run did not write, and a verdict written
again at most once per kill, with the same id and content.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.slow

POLICY = """\
graders:
  - type: tool-calls
    name: no-fetch
    config:
      disallowed: ["^web_fetch$"]
  - type: tool-calls
    name: order
    config:
      sequence: ["^view$", "^edit$", "^bash$"]
  - type: turn-count
    config: {max: 4}
"""
GRADE = (sys.executable, "-m", "trajgrade", "grade", "-q", "--output", "jsonl")


def corpus(n: int, seed: int) -> bytes:
    """Interleaved traces, each ending with ``trace_end``."""
    rng = random.Random(seed)
    live = {f"t{i:03d}": 0 for i in range(n)}
    lines = []
    while live:
        tid = rng.choice(sorted(live))
        step = live[tid]
        ev: dict[str, Any] = {"type": "turn_start"}
        if step % 2:
            name = rng.choice(["view", "edit", "bash", "web_fetch"])
            ev = {"type": "tool_call", "name": name, "call_id": f"c{step}"}
        lines.append(json.dumps({"trace_id": tid, **ev}))
        live[tid] = step + 1
        if step > rng.randint(4, 14):
            lines.append(json.dumps({"trace_id": tid, "type": "trace_end"}))
            del live[tid]
    return ("\n".join(lines) + "\n").encode()


def write_slowly(log: Path, data: bytes, seed: int, done: threading.Event) -> None:
    """Append ``data`` in chunks that cut lines anywhere; rotate at the middle."""
    rng = random.Random(seed)
    i, rotated = 0, False
    f = log.open("ab", buffering=0)
    try:
        while i < len(data):
            n = rng.randint(1, 2000)
            f.write(data[i : i + n])
            i += n
            time.sleep(rng.uniform(0, 0.02))
            if not rotated and i > len(data) // 2:
                end = data.index(b"\n", i - 1) + 1  # the writer finishes its line
                f.write(data[i:end])
                i, rotated = end, True
                log.rename(log.with_name(log.name + ".1"))
                f.close()
                f = log.open("ab", buffering=0)
    finally:
        f.close()
        done.set()


class Run:
    """One trajgrade process; stdout drained as it comes (a reader that keeps
    up, so a kill cuts at most the batch being written)."""

    #: Every process started, killed at the end of the test whatever happens.
    started_all: list[subprocess.Popen[bytes]] = []

    def __init__(self, cwd: Path, args: list[str]) -> None:
        self.proc = subprocess.Popen(
            [*GRADE[:-3], "--output", "jsonl", *args],  # logs: follow_started
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        Run.started_all.append(self.proc)
        self.lines: list[bytes] = []
        self.err: list[bytes] = []
        self._readers = [
            threading.Thread(target=self._read, args=(stream, into), daemon=True)
            for stream, into in (
                (self.proc.stdout, self.lines),
                (self.proc.stderr, self.err),
            )
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream: Any, into: list[bytes]) -> None:
        with stream:
            into.extend(stream)

    def started(self) -> None:
        """Until it follows (a signal before its handlers would just kill it)."""
        deadline = time.monotonic() + 60
        while not any(b"follow_started" in line for line in list(self.err)):
            assert time.monotonic() < deadline, "trajgrade did not start"
            assert self.proc.poll() is None, b"".join(self.err).decode()
            time.sleep(0.01)

    def verdicts(self) -> list[dict[str, Any]]:
        # A line a kill cut short is no verdict (it comes again whole).
        return [json.loads(line) for line in list(self.lines) if line.endswith(b"\n")]

    def end(self, sig: int) -> bytes:
        self.proc.send_signal(sig)
        self.proc.wait(60)
        for reader in self._readers:
            reader.join(60)
        return b"".join(self.err)


@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    derandomize=True,
    phases=(Phase.generate,),  # each example is seconds of processes: no shrinking
)
@given(
    stops=st.lists(
        st.tuples(
            st.floats(0.0, 0.4),
            st.sampled_from(
                [signal.SIGKILL, signal.SIGKILL, signal.SIGTERM, signal.SIGINT]
            ),
        ),
        min_size=3,
        max_size=6,
    ),
    seed=st.integers(0, 1000),
)
def test_follow_state_survives_kills_and_rotation(
    tmp_path_factory: pytest.TempPathFactory,
    stops: list[tuple[float, int]],
    seed: int,
) -> None:
    try:
        _crash_and_compare(tmp_path_factory, stops, seed)
    finally:
        for proc in Run.started_all:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        Run.started_all.clear()


def _crash_and_compare(
    tmp_path_factory: pytest.TempPathFactory,
    stops: list[tuple[float, int]],
    seed: int,
) -> None:
    d = tmp_path_factory.mktemp("follow-crash")
    (d / "p.yaml").write_text(POLICY)
    data = corpus(60, seed)
    (d / "whole.jsonl").write_bytes(data)
    ref = subprocess.run(
        [*GRADE, "-c", "p.yaml", "whole.jsonl"], cwd=d, capture_output=True, check=False
    )
    reference = {v["id"]: v for v in map(json.loads, ref.stdout.splitlines())}

    log = d / "agent.jsonl"
    log.write_bytes(b"")
    args = ["-c", "p.yaml", "--follow", "agent.jsonl", "--state", "state"]
    args += ["--checkpoint-interval", "0.02", "--idle-timeout", "0"]
    done = threading.Event()
    writer = threading.Thread(target=write_slowly, args=(log, data, seed, done))
    seen: list[dict[str, Any]] = []
    kills = 0
    for delay, sig in stops:
        run = Run(d, args)
        run.started()
        if not writer.is_alive() and not done.is_set():
            writer.start()  # (the log's first half must not rotate unseen)
        # (After the first checkpoint, which a new state directory gets as
        # soon as the log is open; the delay is drawn from there.)
        deadline = time.monotonic() + 60
        while not (d / "state" / "checkpoint.msgpack").exists():
            assert time.monotonic() < deadline
            time.sleep(0.005)
        time.sleep(delay)
        err = run.end(sig)
        kills += sig == signal.SIGKILL
        assert run.proc.returncode in (0, 1, -signal.SIGKILL), err.decode()
        seen += run.verdicts()
    assert done.wait(60)
    run = Run(d, args)
    run.started()
    deadline = time.monotonic() + 30
    while missing := set(reference) - {v["id"] for v in seen + run.verdicts()}:
        assert time.monotonic() < deadline, sorted(missing)
        assert run.proc.poll() is None
        time.sleep(0.02)
    time.sleep(0.1)
    err = run.end(signal.SIGTERM)
    assert run.proc.returncode == ref.returncode, err.decode()
    seen += run.verdicts()

    copies: dict[str, list[dict[str, Any]]] = {}
    for v in seen:
        copies.setdefault(v["id"], []).append(v)
    assert set(copies) == set(reference)
    for vid, same in copies.items():
        # (Their ``source`` names the file as read, counting lines from 1
        # after each rotation: equal across copies, not to the whole file's.)
        assert all(_unsourced(v) == _unsourced(reference[vid]) for v in same), vid
        assert all(v["source"] == same[0]["source"] for v in same), vid
        assert len(same) <= 1 + kills, vid


def _unsourced(verdict: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in verdict.items() if k != "source"}
