"""``trajgrade grade --follow`` / ``--watch`` end to end: a real writer
process, real files, ``python -m trajgrade`` as a subprocess."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import IO, Any

import pytest

pytestmark = pytest.mark.slow

POLICY = """\
graders:
  - type: tool-calls
    name: no-fetch
    config:
      disallowed: ["^web_fetch$"]
  - type: turn-count
    config: {max: 50}
"""

# A writer that appends canonical events with random pauses, cutting some
# lines in two writes; it writes the disallowed call, then waits for the
# test to see its verdict before it goes on (a file named GO appears).
WRITER = textwrap.dedent(
    """
    import json, os, random, sys, time
    log, go = sys.argv[1], sys.argv[2]
    rng = random.Random(3)
    def put(f, ev):
        line = (json.dumps(ev) + "\\n").encode()
        if rng.random() < 0.5:
            cut = rng.randint(1, len(line) - 1)
            f.write(line[:cut]); f.flush(); time.sleep(rng.uniform(0, 0.01))
            line = line[cut:]
        f.write(line); f.flush()
        time.sleep(rng.uniform(0, 0.005))
    with open(log, "ab", buffering=0) as f:
        for i in range(40):
            put(f, {"trace_id": "a", "type": "turn_start"})
            put(f, {"trace_id": "a", "type": "tool_call", "name": "view", "call_id": f"v{i}"})
        bad = {"trace_id": "a", "type": "tool_call", "name": "web_fetch", "call_id": "bad"}
        written_at = time.time()
        f.write((json.dumps(bad) + "\\n").encode())
        print(written_at, flush=True)
        while not os.path.exists(go):
            time.sleep(0.01)
        put(f, {"trace_id": "a", "type": "trace_end"})
    """
)


def start(*args: str | Path, cwd: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trajgrade",
            "grade",
            "--output",
            "jsonl",
            *map(str, args),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
    )


class Lines:
    """Lines of a pipe, with a timeout (no buffered reader hiding lines from select)."""

    def __init__(self, out: IO[bytes] | None) -> None:
        assert out is not None
        self.fd = out.fileno()
        self.buf = b""

    def verdict(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.fd], [], [], max(left, 0))
            assert ready, f"no verdict within {timeout} s"
            chunk = os.read(self.fd, 65536)
            assert chunk, "trajgrade exited"
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return json.loads(line)


def stop(p: subprocess.Popen[bytes]) -> tuple[int, bytes, bytes]:
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
    try:
        out, err = p.communicate(timeout=30)
    finally:
        p.kill()
    return p.returncode, out, err


def test_fail_verdict_arrives_while_the_writer_is_still_writing(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(POLICY)
    log = tmp_path / "agent.jsonl"
    log.touch()
    # A relative path, as a user types it.
    grader = start("-c", "p.yaml", "--follow", "agent.jsonl", cwd=tmp_path)
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(log), str(tmp_path / "GO")],
        stdout=subprocess.PIPE,
    )
    try:
        lines = Lines(grader.stdout)
        v = lines.verdict(30)
        seen_at = time.time()
        assert (v["trace_id"], v["grader"], v["outcome"], v["final"]) == (
            "a",
            "no-fetch",
            "fail",
            True,
        )
        assert v["early"] is True
        assert writer.poll() is None  # the writer is still waiting: truly live
        assert writer.stdout is not None
        written_at = float(writer.stdout.readline())
        print(f"append -> verdict: {(seen_at - written_at) * 1000:.1f} ms")
        (tmp_path / "GO").touch()
        writer.wait(30)
        # trace_end closes the trace: the other grader's final verdict follows.
        v2 = lines.verdict(30)
        assert (v2["grader"], v2["outcome"], v2["final"]) == (
            "turn-count",
            "pass",
            True,
        )
    finally:
        writer.kill()
        writer.wait()
        assert writer.stdout is not None
        writer.stdout.close()
        rc, _, err = stop(grader)
    assert rc == 1, err.decode()


def test_idle_timeout_closes_a_trace_without_an_end(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(POLICY)
    log = tmp_path / "session.jsonl"
    log.write_text('{"trace_id":"quiet","type":"turn_start"}\n')
    grader = start(
        "-c", "p.yaml", "--follow", "--idle-timeout", "0.5", log, cwd=tmp_path
    )
    try:
        lines = Lines(grader.stdout)
        got = [lines.verdict(30) for _ in range(2)]
        assert grader.poll() is None  # still following after closing the trace
    finally:
        rc, _, err = stop(grader)
    assert {(v["grader"], v["outcome"], v["final"]) for v in got} == {
        ("no-fetch", "pass", True),
        ("turn-count", "pass", True),
    }
    assert rc == 0, err.decode()


def test_watch_grades_session_files_as_they_appear(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(POLICY)
    sessions = tmp_path / "projects"
    (sessions / "old").mkdir(parents=True)
    (sessions / "old" / "s1.jsonl").write_text(
        '{"type":"tool_call","name":"web_fetch","call_id":"x"}\n'
    )
    grader = start(
        "-c", "p.yaml", "--watch", sessions, "--glob", "**/*.jsonl", cwd=tmp_path
    )
    try:
        lines = Lines(grader.stdout)
        first = lines.verdict(30)
        assert first["trace_id"].endswith("old/s1.jsonl")
        (sessions / "new").mkdir()
        (sessions / "new" / "notes.txt").write_text("not a session\n")
        (sessions / "new" / "s2.jsonl").write_text(
            '{"type":"tool_call","name":"web_fetch","call_id":"y"}\n'
        )
        second = lines.verdict(30)
        assert second["trace_id"].endswith("new/s2.jsonl")
        assert second["outcome"] == "fail"
    finally:
        rc, out, err = stop(grader)
    # SIGTERM without --state: the open traces end with their final verdicts.
    rest = [json.loads(x) for x in out.splitlines()]
    assert {v["grader"] for v in rest} == {"turn-count"}
    assert all("notes.txt" not in v["trace_id"] for v in rest)
    assert rc == 1, err.decode()


def test_follow_survives_rotation(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(POLICY)
    log = tmp_path / "agent.jsonl"
    log.write_text('{"trace_id":"r0","type":"tool_call","name":"web_fetch"}\n')
    grader = start("-c", "p.yaml", "--follow", log, cwd=tmp_path)
    try:
        lines = Lines(grader.stdout)
        assert lines.verdict(30)["trace_id"] == "r0"  # the first file was read
        os.rename(log, tmp_path / "agent.jsonl.1")
        log.write_text('{"trace_id":"r","type":"tool_call","name":"web_fetch"}\n')
        v = lines.verdict(30)
        assert (v["trace_id"], v["outcome"]) == ("r", "fail")
    finally:
        rc, _, err = stop(grader)
    assert b"follow_rotated" in err
    assert rc == 1


def test_metrics_endpoint_on_a_followed_log(tmp_path: Path) -> None:
    """--metrics-port serves file runs too: events, verdicts, open traces, health."""
    import socket
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "p.yaml").write_text(POLICY)
    log = tmp_path / "agent.jsonl"
    log.write_text(
        '{"trace_id":"m","type":"turn_start"}\n'
        '{"trace_id":"m","type":"tool_call","name":"web_fetch","call_id":"x"}\n'
    )
    grader = start(
        "-c", "p.yaml", "--follow", log, "--metrics-port", str(port), cwd=tmp_path
    )
    try:
        Lines(grader.stdout).verdict(30)  # the early fail: both events were graded
        deadline = time.monotonic() + 10
        while True:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as r:
                text = r.read().decode()
            if "trajgrade_events_total 2.0" in text or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz") as r:
            assert r.status == 200
    finally:
        rc, _, err = stop(grader)
    assert "trajgrade_events_total 2.0" in text
    assert "trajgrade_early_fails_total 1.0" in text
    assert 'trajgrade_verdicts_total{outcome="fail"} 1.0' in text
    assert "trajgrade_open_traces 1.0" in text
    assert rc == 1, err.decode()


def test_a_document_rewritten_in_place_is_reported(tmp_path: Path) -> None:
    """A Gemini CLI session .json rewritten whole (as older Gemini CLI does on
    every update) cannot be followed as a growing log: trajgrade says so."""
    doc = (
        Path(__file__).parents[1]
        / "fixtures"
        / "gemini-cli"
        / "agentcmd_gemini_3_calls.json"
    ).read_bytes()
    (tmp_path / "p.yaml").write_text(
        "graders:\n  - type: tool-calls\n    config: {disallowed: ['^replace$']}\n"
    )
    session = tmp_path / "session.json"
    session.write_bytes(doc)
    grader = start("-c", "p.yaml", "--follow", session, cwd=tmp_path)
    try:
        lines = Lines(grader.stdout)
        assert lines.verdict(30)["outcome"] == "fail"  # the document was read
        # Rewritten in place with one more byte (what a writer that
        # re-serialises the whole session on each update does).
        with session.open("r+b") as f:
            f.truncate(0)
            f.write(doc.replace(b"{", b"{ ", 1))
        time.sleep(1.5)
    finally:
        rc, _, err = stop(grader)
    assert b"follow_document_rewritten" in err, err.decode()[-2000:]
    assert rc == 1


def test_a_misspelt_notifier_choice_is_a_usage_error(tmp_path: Path) -> None:
    # TRAJGRADE_NOTIFY forces a backend for diagnosis: a typo must not
    # quietly diagnose another one.
    (tmp_path / "p.yaml").write_text(POLICY)
    log = tmp_path / "agent.jsonl"
    log.write_text('{"trace_id": "a", "type": "turn_start"}\n')
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "trajgrade",
            "grade",
            "-c",
            str(tmp_path / "p.yaml"),
            "--follow",
            str(log),
        ],
        capture_output=True,
        timeout=60,
        env={**os.environ, "TRAJGRADE_NOTIFY": "inotfy"},
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert b"TRAJGRADE_NOTIFY='inotfy' is not a notifier" in done.stderr
    assert b"inotify, watchfiles, poll" in done.stderr
