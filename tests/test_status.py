"""The live status line: on a terminal only, never in the verdict stream."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parents[1] / "src" / "trajgrade" / "examples"
_ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


def run_on_terminal(*args: str) -> tuple[int, bytes]:
    """Run trajgrade with stdout and stderr on a pseudo-terminal."""
    main, sub = pty.openpty()
    p = subprocess.Popen(
        [sys.executable, "-m", "trajgrade", "grade", *args],
        stdout=sub,
        stderr=sub,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "160", "TERM": "xterm"},
    )
    os.close(sub)
    out = bytearray()
    try:
        while True:
            try:
                data = os.read(main, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            out += data
    finally:
        os.close(main)
        p.kill()
        p.wait()
    return p.returncode, bytes(out)


@pytest.mark.slow
def test_terminal_gets_a_status_line_and_intact_verdicts(tmp_path: Path) -> None:
    log = tmp_path / "session.jsonl"
    # Enough input that the display is drawn at least once.
    log.write_bytes((EXAMPLES / "session.jsonl").read_bytes())
    status, out = run_on_terminal("-c", str(EXAMPLES / "policy.yaml"), str(log))
    assert status == 1
    text = _ANSI.sub(b"", out)
    assert b"grading" in text
    assert b"events/s" in text
    # Verdict lines come through whole.
    assert re.search(rb"FAIL +leaky-agent +safe-and-tested", text)
    assert b"traces," in text  # the closing summary
    assert b"run_finished" not in text  # the summary already said it


@pytest.mark.slow
def test_quiet_and_pipes_get_no_status_line(tmp_path: Path) -> None:
    args = ["-c", str(EXAMPLES / "policy.yaml"), str(EXAMPLES / "session.jsonl")]
    _, out = run_on_terminal("-q", *args)
    assert b"events/s" not in _ANSI.sub(b"", out)
    p = subprocess.run(
        [sys.executable, "-m", "trajgrade", "grade", *args],
        capture_output=True,
        check=False,
    )
    assert b"events/s" not in p.stdout
    assert b"events/s" not in p.stderr
    assert all(line.startswith(b"{") for line in p.stdout.splitlines())


@pytest.mark.slow
def test_stdin_on_a_terminal_says_it_is_read(tmp_path: Path) -> None:
    """No input named, stdin a terminal: a hint, not a silent "following" line."""
    cfg = tmp_path / "policy.yaml"
    cfg.write_text("graders:\n  - {type: tool-call-count, config: {max: 5}}\n")
    main, sub = pty.openpty()
    p = subprocess.Popen(
        [sys.executable, "-m", "trajgrade", "grade", "-c", str(cfg)],
        stdin=sub,
        stdout=sub,
        stderr=sub,
        env={**os.environ, "COLUMNS": "160", "TERM": "xterm"},
    )
    os.close(sub)
    out = bytearray()
    try:
        while b"Ctrl-D" not in out:
            out += os.read(main, 65536)
        os.write(main, b'{"trace_id":"t","type":"tool_call","name":"bash"}\n\x04')
        while True:
            try:
                data = os.read(main, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            out += data
        assert p.wait(timeout=30) == 0
    finally:
        os.close(main)
        p.kill()
    text = _ANSI.sub(b"", bytes(out))
    assert b"reading events from stdin" in text
    assert b"PASS" in text  # the typed line was graded at Ctrl-D
