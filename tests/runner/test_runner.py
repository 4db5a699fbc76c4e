"""The runner at runtime: shutdown on signals, the clock without events."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

import contextlib

POLICY = """\
graders:
  - type: tool-calls
    config: {required: [finish]}
  - type: tool-calls
    name: guard
    config: {disallowed: [boom]}
  - type: wall-time
    config: {max: '1s'}
"""


@contextlib.contextmanager
def _grader(
    tmp_path: Path, *extra: str
) -> Iterator[tuple[subprocess.Popen[bytes], queue.Queue[dict[str, Any]]]]:
    """A running `trajgrade grade` on a pipe, its verdicts in a queue; always reaped."""
    cfg = tmp_path / "policy.yaml"
    cfg.write_text(POLICY)
    proc = subprocess.Popen(
        [sys.executable, "-m", "trajgrade", "grade", "-q", "-c", str(cfg), *extra],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    verdicts: queue.Queue[dict[str, Any]] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            verdicts.put(json.loads(line))

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        yield proc, verdicts
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        reader.join(timeout=10)
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()


def _send(proc: subprocess.Popen[bytes], line: bytes) -> None:
    assert proc.stdin is not None
    proc.stdin.write(line + b"\n")
    proc.stdin.flush()


def _drain(q: queue.Queue[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    with contextlib.suppress(queue.Empty):
        while True:
            out.append(q.get_nowait())
    return out


def test_sigterm_finishes_open_traces_and_exits_with_the_verdict_status(
    tmp_path: Path,
) -> None:
    """On SIGTERM every open trace gets its final verdicts, flushed, and the exit status reflects them."""
    with _grader(tmp_path, "--clock", "event") as (proc, verdicts):
        _send(
            proc, b'{"trace_id":"t1","type":"tool_call","name":"start","call_id":"1"}'
        )
        _send(proc, b'{"trace_id":"t2","type":"tool_call","name":"boom","call_id":"1"}')
        first = verdicts.get(timeout=20)  # the runner is up and reading
        assert (first["trace_id"], first["grader"], first["outcome"]) == (
            "t2",
            "guard",
            "fail",
        )
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 1
    finals = {
        (v["trace_id"], v["grader"]): v["outcome"]
        for v in [first, *_drain(verdicts)]
        if v["final"]
    }
    assert finals == {
        ("t1", "tool-calls"): "fail",
        ("t1", "guard"): "pass",
        ("t1", "wall-time"): "pass",
        ("t2", "guard"): "fail",
        ("t2", "tool-calls"): "fail",
        ("t2", "wall-time"): "pass",
    }


def test_wall_time_fires_on_the_clock_while_no_event_arrives(tmp_path: Path) -> None:
    """A live trace that stops producing events fails its wall-time budget on the runner's clock."""
    with _grader(tmp_path, "--clock", "wall", "--tick", "0.05") as (proc, verdicts):
        _send(
            proc, b'{"trace_id":"hung","type":"tool_call","name":"sleep","call_id":"1"}'
        )
        verdict = verdicts.get(
            timeout=20
        )  # about 1 s after the event; stdin still open
        assert (verdict["grader"], verdict["outcome"], verdict["early"]) == (
            "wall-time",
            "fail",
            True,
        )
        assert proc.poll() is None
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=30) == 1


def test_devices_and_empty_inputs_are_read_without_error(tmp_path: Path) -> None:
    """/dev/null (a character device that cannot be polled) is an empty input,
    not a failure to read; with nothing graded, the status says so (5), never
    a pass."""
    cfg = tmp_path / "policy.yaml"
    cfg.write_text(POLICY)
    proc = subprocess.run(
        [sys.executable, "-m", "trajgrade", "grade", "-c", str(cfg), "/dev/null"],
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 5, proc.stderr
    assert proc.stdout == b""
    assert b"source_failed" not in proc.stderr


def test_a_real_session_ending_with_unanswered_calls_reports_them(
    tmp_path: Path,
) -> None:
    """A real Claude Code transcript cut off after three calls logs those calls at the end."""
    fixture = (
        Path(__file__).parents[1]
        / "fixtures"
        / "claude-code"
        / "agentcmd_v2.0.14_trailing_unanswered_calls.jsonl"
    )
    cfg = tmp_path / "policy.yaml"
    cfg.write_text("graders:\n  - {type: tool-call-count, config: {max: 1000}}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "trajgrade", "grade", "-c", str(cfg), str(fixture)],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    logs = [json.loads(line) for line in proc.stderr.splitlines()]
    (unanswered,) = [e for e in logs if e["event"] == "calls_unanswered"]
    assert unanswered["reason"].startswith("3 tool call(s) never got a result")


def test_unanswered_calls_of_many_traces_are_one_log_line(tmp_path: Path) -> None:
    """Traces closed with open calls (end of input, Ctrl-C) are summarised in one line."""
    log = tmp_path / "open.jsonl"
    log.write_text(
        "".join(
            f'{{"trace_id":"t{i}","type":"tool_call","name":"bash","call_id":"c{i}"}}\n'
            for i in range(12)
        )
    )
    cfg = tmp_path / "policy.yaml"
    cfg.write_text("graders:\n  - {type: tool-call-count, config: {max: 1000}}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "trajgrade", "grade", "-c", str(cfg), str(log)],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    logs = [json.loads(line) for line in proc.stderr.splitlines()]
    (unanswered,) = [e for e in logs if e["event"] == "calls_unanswered"]
    assert unanswered["traces"] == 12
    assert unanswered["trace_ids"] == [f"t{i}" for i in range(10)]
    assert unanswered["reason"].startswith("12 traces ended with tool calls")


def test_trace_id_template_names_traces_of_logs_without_ids(tmp_path: Path) -> None:
    """--trace-id '{stem}' names each id-less file's trace after the file."""
    cfg = tmp_path / "policy.yaml"
    cfg.write_text("graders:\n  - {type: tool-call-count, config: {max: 5}}\n")
    for name in ("alpha.jsonl", "beta.jsonl"):
        (tmp_path / name).write_text('{"type":"tool_call","name":"bash"}\n')
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "trajgrade",
            "grade",
            "-q",
            "-c",
            str(cfg),
            "--trace-id",
            "run-{stem}",
            str(tmp_path / "alpha.jsonl"),
            str(tmp_path / "beta.jsonl"),
        ],
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert sorted(
        json.loads(line)["trace_id"] for line in proc.stdout.splitlines()
    ) == ["run-alpha", "run-beta"]


def test_a_bad_trace_id_template_and_a_closed_stdin_are_usage_errors(
    tmp_path: Path,
) -> None:
    """Both are reported with the fix and exit status 2, without a traceback."""
    cfg = tmp_path / "policy.yaml"
    cfg.write_text("graders:\n  - {type: tool-call-count, config: {max: 5}}\n")
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "trajgrade",
            "grade",
            "-c",
            str(cfg),
            "--trace-id",
            "{nope}",
            "/dev/null",
        ],
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert bad.returncode == 2, bad.stderr
    assert b"'--trace-id': unknown field {nope}; use a template with" in bad.stderr
    closed = subprocess.run(
        f"exec {sys.executable} -m trajgrade grade -c {cfg} <&-",
        shell=True,
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert closed.returncode == 2 and b"stdin is closed" in closed.stderr
    assert b"Traceback" not in bad.stderr + closed.stderr


def test_idle_traces_are_looked_for_every_tick_up_to_a_tenth_of_the_timeout() -> None:
    """A look for idle traces visits every open trace: short timeouts are
    looked at every tick, longer ones every tenth of the timeout, and no
    look is more than a second after the one before."""
    from trajgrade.runner.options import RunOptions

    def every(idle: float | None) -> float:
        return RunOptions(inputs=[], idle_timeout=idle).idle_scan_interval

    assert every(None) == every(0.5) == every(1.0) == 0.1
    assert abs(every(3.0) - 0.3) < 1e-9
    assert every(10.0) == every(3600.0) == 1.0
