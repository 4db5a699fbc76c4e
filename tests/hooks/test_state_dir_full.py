"""A full state directory denies the calls of a guard with state (issue 35).

The agent can fill the disk itself; a hook that then allowed its calls
(logging ``state_not_saved``) let 12 of 12 calls run under ``max: 5``. The
state directory here is a real tmpfs of a few pages, filled to the last
byte; a cold hook and ``trajgrade serve`` each deny every call whose state
they cannot make durable, and say why.
"""

from __future__ import annotations

import contextlib
import errno
import http.client
import json
import os
import subprocess
from typing import TYPE_CHECKING

import pytest
from tests.hooks._replay import hook_cmd
from tests.hooks._serve import serving
from tests.hooks.test_serve_durability import MAX, POLICY, _call, _port, _pre

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = pytest.mark.slow


@pytest.fixture(name="small_disk")
def small_disk_fixture(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs, unmounted afterwards; skipped loudly where mount is
    not permitted (not root, or no CAP_SYS_ADMIN)."""
    where = tmp_path / "disk"
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"SKIPPED LOUDLY: cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _fill(disk: Path) -> None:
    """Write to ``disk`` until the file system refuses (ENOSPC)."""
    with (disk / "filler").open("wb", buffering=0) as f:
        block = b"\0" * 4096
        with contextlib.suppress(OSError):
            while True:
                f.write(block)
    probe = disk / "probe"
    with pytest.raises(OSError) as info, probe.open("wb", buffering=0) as f:
        f.write(b"x" * 4096)
    assert info.value.errno == errno.ENOSPC


def _body(port: int, payload: dict[str, object]) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", "/hook/claude-code", body=json.dumps(payload))
        return conn.getresponse().read().decode()
    finally:
        conn.close()


def _gate_answers(outs: list[str]) -> list[bool]:
    allowed = []
    for out in outs:
        spec = json.loads(out).get("hookSpecificOutput") or {} if out.strip() else {}
        allowed.append(spec.get("permissionDecision") != "deny")
    return allowed


def test_a_cold_hook_on_a_full_state_directory_denies(
    small_disk: Path, tmp_path: Path
) -> None:
    """Twelve calls under ``max: 5`` with the state directory full: at most
    five run (here none: no state can be saved), each deny says why."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    state = small_disk / "state"
    args = ("-c", policy, "--state-dir", state)
    first = subprocess.run(  # the session's state exists while there is room
        hook_cmd("claude-code", *args),
        input=json.dumps(_pre("full", 0)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert _gate_answers([first.stdout]) == [True], first.stderr
    _fill(small_disk)
    outs = [
        subprocess.run(
            hook_cmd("claude-code", *args),
            input=json.dumps(_pre("full", n)),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        for n in range(1, 12)
    ]
    assert [o.returncode for o in outs] == [0] * 11
    allowed = _gate_answers([first.stdout] + [o.stdout for o in outs])
    assert sum(allowed) <= MAX, allowed
    assert allowed[1:] == [False] * 11
    assert "could not save this session's guard state" in outs[0].stdout
    assert "No space left on device" in outs[0].stdout
    assert "state_not_saved" in outs[0].stderr


def test_serve_on_a_full_state_directory_denies(
    small_disk: Path, tmp_path: Path
) -> None:
    """The daemon's journal cannot take the decision: the call is denied
    (whatever ``--fail-closed`` says), with the reason, and logged. A new
    call the daemon used to allow from memory would be forgotten by a
    restart."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    state = small_disk / "state"
    with serving(policy, state, "--checkpoint-interval", "3600") as (url, _):
        port = _port(url)
        assert _call(port, _pre("full", 0)) is False
        _fill(small_disk)
        bodies = [_body(port, _pre("full", n)) for n in range(1, 12)]
        # New sessions until the journal's last page is used up (a record
        # that still fits in it is durable, and decided as usual).
        others = [_body(port, _pre(f"other{i}", 0)) for i in range(60)]
    allowed = _gate_answers(bodies)
    assert allowed.count(True) + 1 <= MAX, allowed
    refused = [b for b, ok in zip(others, _gate_answers(others), strict=True) if not ok]
    assert refused, "the journal never filled up"
    assert "could not record this session's guard state" in refused[0]
    assert "No space left on device" in refused[0]
    os.unlink(small_disk / "filler")
    log = (state / "hooks.log").read_text()
    assert "state_not_saved" in log or not log  # the log shared the full disk
