"""The live status line: on a terminal only, never in the verdict stream; and
what a reader of stdin says when stdin is a terminal."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parents[2] / "src" / "trajgrade" / "examples"
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
    try:
        out = _drain(main)
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
        out += _drain(main)
        assert p.wait(timeout=30) == 0
    finally:
        os.close(main)
        p.kill()
    text = _ANSI.sub(b"", bytes(out))
    assert b"reading events from stdin" in text
    assert b"PASS" in text  # the typed line was graded at Ctrl-D


def _typed_on_terminal(argv: list[str], wait_for: bytes, typed: bytes) -> bytes:
    """Run trajgrade with stdin, stdout and stderr on one pseudo-terminal; once
    ``wait_for`` shows (or after 10 s), type ``typed`` and read to the end."""
    main, sub = pty.openpty()
    p = subprocess.Popen(
        [sys.executable, "-m", "trajgrade", *argv],
        stdin=sub,
        stdout=sub,
        stderr=sub,
        env={**os.environ, "COLUMNS": "400", "TERM": "xterm"},
    )
    os.close(sub)
    out = bytearray()
    deadline = time.monotonic() + 10
    try:
        while wait_for not in out and time.monotonic() < deadline:
            if select.select([main], [], [], 0.1)[0]:
                out += os.read(main, 65536)
        os.write(main, typed)
        out += _drain(main)
        p.wait(timeout=30)
    finally:
        os.close(main)
        p.kill()
    return _ANSI.sub(b"", bytes(out)).replace(b"\r\n", b"\n")


_CALL = b'{"trace_id":"t","type":"tool_call","name":"bash","call_id":"c1"}'
#: Claude Code's PreToolUse payload for a read of `.env`, which guard.yaml denies.
_READ_ENV = (
    b'{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Read",'
    b'"tool_input":{"file_path":"/w/.env"},"tool_use_id":"u1","cwd":"/w"}'
)
_GUARD = ["-c", str(EXAMPLES / "guard.yaml")]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("argv", "hint", "typed", "answer"),
    [
        (["convert"], b"trajgrade convert: reading a log from stdin", _CALL, b'"c1"'),
        (
            ["stats", "--json"],
            b"trajgrade stats: reading a log from stdin",
            _CALL,
            b'"tool_calls":{"bash":1}',
        ),
        (
            ["hook", "claude-code", *_GUARD, "--state-dir", "{tmp}"],
            b"trajgrade hook claude-code: expects a hook payload on stdin from the agent",
            _READ_ENV,
            b'"permissionDecision":"deny"',
        ),
    ],
    ids=["convert", "stats", "hook"],
)
def test_other_readers_of_stdin_say_so_on_a_terminal(
    tmp_path: Path, argv: list[str], hint: bytes, typed: bytes, answer: bytes
) -> None:
    """`convert`, `stats` and `hook AGENT` waited in silence on a terminal
    (it looked like a hang); they now say what they read, as `grade` does,
    and still read what is typed."""
    argv = [a.format(tmp=tmp_path) for a in argv]
    text = _typed_on_terminal(argv, hint, typed + b"\n\x04")
    assert hint in text, text
    assert answer in text.split(hint, 1)[1], text


def _drain(main: int) -> bytearray:
    """Everything the child writes to its terminal until it closes it."""
    out = bytearray()
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        out += data
    return out
