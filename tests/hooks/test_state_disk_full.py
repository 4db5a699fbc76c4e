"""A full disk under the hook state directory (the agent can fill it itself)
must not turn a budget into no budget: through the real `trajgrade hook`
process on a real, small tmpfs, a session under `max: 5` whose state cannot
be saved gets its calls denied, fail-closed, with the reason."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.hooks._installed import denied, payload

POLICY = """\
graders:
  - type: tool-call-count
    on_fail: deny
    config: {max: 5}
"""


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(disk: Path) -> None:
    """Write until the file system is full (ENOSPC)."""
    with contextlib.suppress(OSError), (disk / "filler").open("wb") as f:
        while True:
            f.write(b"x" * 65536)
            f.flush()


def _hook(
    policy: Path, state: Path, data: dict[str, object], *fail: str
) -> dict | None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "trajgrade",
            "hook",
            "claude-code",
            "-c",
            str(policy),
            "--state-dir",
            str(state),
            *fail,
        ],
        input=json.dumps(data),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode in (0, 2), proc.stderr
    out = proc.stdout.strip()
    return json.loads(out) if out else None


def _calls(policy: Path, state: Path, n: int, *fail: str) -> list[str | None]:
    return [
        denied(
            _hook(policy, state, payload("03-PreToolUse", tool_use_id=f"c{i}"), *fail)
        )
        for i in range(n)
    ]


def test_a_full_disk_denies_fail_closed(tmp_path: Path, small_disk: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    state = small_disk / "state"
    _hook(policy, state, payload("01-SessionStart"), "--fail-closed")
    first = _calls(policy, state, 2, "--fail-closed")
    assert first == [None, None]  # saved: two calls of five spent
    _fill(small_disk)
    later = _calls(policy, state, 10, "--fail-closed")
    allowed = first.count(None) + later.count(None)
    assert allowed <= 5, f"{allowed} calls allowed under max: 5 with a full disk"
    assert all(r is not None and "cannot be saved" in r for r in later), later
    log = (state / "hooks.log").read_text() if (state / "hooks.log").exists() else ""
    assert "state_not_saved" in log or not log  # the log may not fit either


def test_fail_open_still_answers_as_decided(tmp_path: Path, small_disk: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    state = small_disk / "state"
    _hook(policy, state, payload("01-SessionStart"))
    _fill(small_disk)
    assert _calls(policy, state, 2) == [None, None]  # documented: fail-open
