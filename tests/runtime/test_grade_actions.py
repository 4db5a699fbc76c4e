"""On-fail actions on ``trajgrade grade`` (batch, follow): real commands, real processes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parents[2] / "src" / "trajgrade" / "examples"
POLICY = str(EXAMPLES / "policy.yaml")
SESSION = str(EXAMPLES / "session.jsonl")


GRADE = (sys.executable, "-m", "trajgrade", "grade", "-q", "--output", "jsonl")


def grade(*args: str, **kw: object) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*GRADE, *args],
        capture_output=True,
        timeout=60,
        check=False,
        **kw,  # type: ignore[arg-type]
    )


@pytest.mark.slow
def test_on_fail_runs_once_per_failed_trace_with_the_verdict(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    cmd = f'cat > {out}/"$TRAJGRADE_TRACE_ID".json; echo "$TRAJGRADE_GRADER" > {out}/"$TRAJGRADE_TRACE_ID".grader'
    p = grade("-c", POLICY, "--on-fail", cmd, SESSION)
    assert p.returncode == 1, p.stderr.decode()
    assert sorted(f.name for f in out.iterdir()) == [
        "leaky-agent.grader",
        "leaky-agent.json",
    ]
    verdict = json.loads((out / "leaky-agent.json").read_text())
    assert (verdict["trace_id"], verdict["outcome"]) == ("leaky-agent", "fail")
    assert (out / "leaky-agent.grader").read_text().strip() == "safe-and-tested"


@pytest.mark.slow
def test_fail_fast_stops_reading_at_the_first_fail(tmp_path: Path) -> None:
    # Two copies of the session as separate inputs: the second is never read.
    second = tmp_path / "later.jsonl"
    second.write_text(Path(SESSION).read_text().replace("fix-timeout", "later"))
    p = grade("-c", POLICY, "--fail-fast", SESSION, str(second))
    assert p.returncode == 1
    traces = {json.loads(line)["trace_id"] for line in p.stdout.splitlines()}
    assert "later" not in traces
    assert "leaky-agent" in traces


@pytest.mark.slow
def test_signal_reaches_a_process_at_the_first_fail(tmp_path: Path) -> None:
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        p = grade("-c", POLICY, "--signal", f"{victim.pid}:TERM", SESSION)
        assert p.returncode == 1
        deadline = time.monotonic() + 10
        while victim.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert victim.returncode == -15
    finally:
        victim.kill()
        victim.wait()


DENY_AND_COUNT = """\
graders:
  - type: tool-calls
    name: no-env
    config:
      disallowed: [{name: "^view$", path: "\\\\.env$"}]
  - type: tool-call-count
    name: few
    config: {max: 1}
"""


def test_decisions_on_stdout_come_in_the_same_place_however_the_input_is_read(
    tmp_path: Path,
) -> None:
    """``--decisions -``: one stream of verdicts and decisions, the same for
    a file read whole and for a pipe written a line at a time (read whole,
    every verdict of a chunk used to come before any of its decisions)."""
    (tmp_path / "p.yaml").write_text(DENY_AND_COUNT)
    view = '{"type":"tool_call","trace_id":"%s","name":"view","call_id":"%s","args":{"path":".env"}}\n'
    lines = [view % (t, c) for c, t in enumerate("abab")]
    lines += [
        '{"type":"trace_end","trace_id":"a"}\n',
        '{"type":"trace_end","trace_id":"b"}\n',
    ]
    (tmp_path / "e.jsonl").write_text("".join(lines))
    args = ("-c", "p.yaml", "--decisions", "-")
    whole = grade(*args, "e.jsonl", cwd=tmp_path)
    proc = subprocess.Popen(
        [*GRADE, *args, "-"],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdin is not None
    for line in lines:
        proc.stdin.write(line.encode())
        proc.stdin.flush()
        time.sleep(0.05)  # each line its own read
    out, _ = proc.communicate(timeout=60)
    piped = out.splitlines()
    assert proc.returncode == 1
    kinds = [
        (x.get("type", "verdict"), x["trace_id"], x.get("at_event"))
        for x in map(json.loads, whole.stdout.splitlines())
    ]
    # Each event's verdicts, then its decisions (a retried view is denied
    # again; past the count's budget every call gets the abort too).
    assert kinds[:5] == [
        ("verdict", "a", 1),
        ("decision", "a", 1),
        ("verdict", "b", 1),
        ("decision", "b", 1),
        ("verdict", "a", 2),
    ]
    # The same stream but for the input's name (``-`` for the pipe): the
    # deciding lines agree.
    named = whole.stdout.replace(b'"source":{"file":"e.jsonl"', b'"source":{"file":"-"')
    assert named.splitlines() == piped
    assert b'"source":{"file":"-","line":1}' in piped[0]


def _gone_pid() -> int:
    """The PID of a process that has exited (and been reaped)."""
    gone = subprocess.Popen(["true"])
    gone.wait(timeout=10)
    return gone.pid


@pytest.mark.parametrize("command", ["grade", "run"])
def test_signal_to_no_such_process_is_refused_at_start(command: str) -> None:
    """`--signal PID` of no running process used to be found out only at the
    first fail (a `signal_failed` line, the process to stop left running):
    now a usage error at start-up naming the PID and the fix."""
    pid = _gone_pid()
    argv = [sys.executable, "-m", "trajgrade", command, "-c", POLICY]
    argv += ["--signal", f"{pid}:INT"]
    argv += [SESSION] if command == "grade" else ["--", "cat", SESSION]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert p.returncode == 2, p.stderr
    assert (
        f"Invalid value for '--signal': '{pid}:INT': no process {pid} is running"
        in p.stderr
    )
    assert "give the PID of the running process" in p.stderr
    assert p.stdout == ""  # nothing was graded


def _foreign_process() -> tuple[subprocess.Popen[bytes] | None, int, list[str]]:
    """A process of another user (started here, or PID 1), its PID, and the
    argv prefix that runs trajgrade without the right to signal it (as root:
    without CAP_KILL, which setpriv drops from the bounding set)."""
    if os.geteuid() != 0:
        if os.stat("/proc/1").st_uid == os.geteuid():
            pytest.skip("PID 1 is this user's: no process of another user to try")
        return None, 1, []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("needs setpriv (util-linux) to drop CAP_KILL as root")
    nobody = subprocess.Popen(["sleep", "30"], user=65534, group=65534, extra_groups=[])
    return nobody, nobody.pid, [setpriv, "--bounding-set=-kill", "--"]


def test_signal_to_a_process_that_cannot_be_signalled_is_refused_at_start() -> None:
    """Another user's process: the same usage error, saying why."""
    target, pid, prefix = _foreign_process()
    try:
        argv = [*prefix, sys.executable, "-m", "trajgrade", "grade", "-c", POLICY]
        p = subprocess.run(
            [*argv, "--signal", str(pid), SESSION],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        if target is not None:
            target.kill()
            target.wait(timeout=10)
    assert p.returncode == 2, p.stderr
    assert (
        f"process {pid} belongs to another user, so it cannot be signalled" in p.stderr
    )
