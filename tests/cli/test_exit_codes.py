"""Exit statuses that cannot be green by accident.

Before: every stray ``OSError`` ended ``grade`` with status 1 and "cannot
write verdicts to stdout" (a ``--metrics-port`` already taken said so), and
the shipped systemd units count 1 as success: a service that could not
start looked like one that had graded a failing trace. Now each start-up
failure has its own status and message (docs/reliability.md), and 1 is only
ever a verdict. Real ``python -m trajgrade`` processes, real sockets.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from trajgrade.runtime.exit_status import EXIT_CODES

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "src" / "trajgrade" / "examples" / "policy.yaml"
SESSION = ROOT / "src" / "trajgrade" / "examples" / "session.jsonl"


def _grade(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trajgrade", "grade", "-c", str(POLICY), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port another socket listens on."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held.getsockname()[1]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port  # (closed: nothing listens there now)


def test_a_metrics_port_already_taken_is_status_6(taken_port: int) -> None:
    done = _grade("--metrics-port", str(taken_port), str(SESSION))
    assert done.returncode == 6, done.stderr
    assert (
        f"cannot listen on 127.0.0.1:{taken_port} (--metrics-port): the port is in use"
        in done.stderr
    )
    assert "pick another port for --metrics-port" in done.stderr
    assert "stdout" not in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""  # nothing graded: it stopped before reading


def test_an_otlp_port_already_taken_is_status_6(taken_port: int) -> None:
    done = _grade("--otlp", f"127.0.0.1:{taken_port}")
    assert done.returncode == 6, done.stderr
    assert f"cannot listen on 127.0.0.1:{taken_port} (--otlp)" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_unreachable_broker_at_start_is_status_7() -> None:
    port = _closed_port()
    done = _grade("--kafka-bootstrap", f"127.0.0.1:{port}", "--topic", "events")
    assert done.returncode == 7, done.stderr
    assert f"cannot use Kafka at 127.0.0.1:{port}" in done.stderr
    assert "check --kafka-bootstrap" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("where", ["a file as the state dir", "under a file"])
def test_a_state_dir_that_cannot_be_used_at_start_is_status_9(
    tmp_path: Path, where: str
) -> None:
    (tmp_path / "plain").write_text("")
    state = "plain" if where == "a file as the state dir" else "plain/state"
    done = _grade("--state", state, str(SESSION), cwd=tmp_path)
    assert done.returncode == 9, done.stderr
    assert "plain" in done.stderr and "cannot create the state directory" in done.stderr
    assert "pass a writable --state DIR" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_failed_verdict_is_still_status_1() -> None:
    """(The statuses above are not a grader that stopped failing.)"""
    done = _grade(str(SESSION))
    assert done.returncode == 1, done.stderr  # leaky-agent reads .env


def test_every_status_is_documented_in_reliability_and_in_help() -> None:
    doc = (ROOT / "docs" / "reliability.md").read_text()
    section = doc.split("### `trajgrade grade`", 1)[1].split("### Services", 1)[0]
    documented = {int(m) for m in re.findall(r"^\| (\d+) \|", section, re.MULTILINE)}
    assert documented == set(EXIT_CODES)
    shown = subprocess.run(
        [sys.executable, "-m", "trajgrade", "grade", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    listed = shown.split("Exit status:", 1)[1]
    for code in EXIT_CODES:
        assert re.search(rf"^\s+{code}\s", listed, re.MULTILINE), code


def test_the_units_count_only_documented_success_statuses() -> None:
    """0 and 1 (a verdict; nothing else exits 1), and nothing else: no
    start-up failure is a success to systemd."""
    for unit in sorted((ROOT / "deploy" / "systemd").glob("*.service")):
        text = unit.read_text()
        success = re.findall(r"^SuccessExitStatus=(.*)$", text, re.MULTILINE)
        assert success == ["1"], unit.name
        assert not re.search(r"^RestartPreventExitStatus=", text, re.MULTILINE)
        assert "Restart=" in text
    services = (ROOT / "docs" / "reliability.md").read_text().split("### Services")[1]
    assert "count 0 and 1 as success" in services
