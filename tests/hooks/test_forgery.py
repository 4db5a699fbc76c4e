"""Session state cannot be forged from the agent's side.

The agent's shell can run the installed hook command itself
(`echo '{…SessionEnd…}' | trajgrade hook claude-code …`). Two defences,
both through the real `trajgrade hook` process:

* a SessionEnd never erases what the session did (the state from before it
  is kept, and the session goes on from it);
* under the sandbox the state directory (with the host key) is hidden from
  the agent's processes: a call that cannot read the key is refused and
  changes nothing. The hiding is done here by bubblewrap, as Claude Code's
  sandbox does (a ``--ro-bind /dev/null`` over the file).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from tests.hooks._installed import POLICY, denied, install, payload, run_hook

STATES = Path(".local/state/trajgrade/hooks")


@pytest.fixture
def stopped(tmp_path: Path) -> Path:
    """An installed guard whose session the policy has stopped."""
    (tmp_path / "policy.yaml").write_text(POLICY)
    assert install(tmp_path, "-c", "policy.yaml").returncode == 0
    run_hook(tmp_path, payload("01-SessionStart"))
    for n in range(3):
        answer, _ = run_hook(tmp_path, payload("03-PreToolUse", tool_use_id=f"t{n}"))
    assert denied(answer) is not None  # the third call: the run is stopped
    return tmp_path


def _state(home: Path) -> bytes:
    (path,) = (home / STATES / "claude-code").glob("*.state")
    return path.read_bytes()


def test_a_session_end_does_not_erase_the_stop(stopped: Path) -> None:
    run_hook(stopped, payload("12-SessionEnd"))
    run_hook(stopped, payload("01-SessionStart"))
    answer, _ = run_hook(stopped, payload("03-PreToolUse", tool_use_id="after"))
    assert denied(answer) is not None


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_a_call_that_cannot_read_the_host_key_changes_nothing(stopped: Path) -> None:
    before = _state(stopped)
    hide = ("bwrap", "--dev-bind", "/", "/", "--ro-bind", "/dev/null")
    key = str(stopped / STATES / "host.key")
    _, err = run_hook(stopped, payload("12-SessionEnd"), prefix=(*hide, key))
    assert "did not come from the agent's host" in err
    assert _state(stopped) == before
    # A forged gate call is refused too, and the real one still is.
    forged, _ = run_hook(stopped, payload("03-PreToolUse"), prefix=(*hide, key))
    assert "did not come from the agent's host" in str(denied(forged))
    real, _ = run_hook(stopped, payload("03-PreToolUse", tool_use_id="real"))
    assert "stopped" in str(denied(real))


def test_a_replaced_host_key_is_not_the_host(stopped: Path) -> None:
    """A process that can write the state dir but not read the key (or that
    writes its own key) does not pass: the command pins the key's id."""
    before = _state(stopped)
    (stopped / STATES / "host.key").write_bytes(b"\0" * 32)
    run_hook(stopped, payload("12-SessionEnd"))
    assert _state(stopped) == before


def test_serve_install_needs_a_token(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.hooks._installed import env

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "trajgrade",
            "hook",
            "install",
            "codex",
            "--user",
            "--server",
            "http://127.0.0.1:8787",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env(tmp_path),
    )
    assert proc.returncode == 2
    assert "--server needs --token-file" in proc.stderr
    assert not (tmp_path / ".codex").exists()
