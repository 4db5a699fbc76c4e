"""The real Claude Code CLI with ``hook install --server`` and the daemon
down: ``--fail-closed`` must hold on every tool call.

Claude Code runs a call whose ``http`` hook fails (connection refused,
timeout, HTTP 500): a non-blocking error. ``hook install claude-code
--server URL --fail-closed`` used to register http hooks for every event
but ``SessionStart`` all the same, so with the daemon down every call ran;
now it registers the thin client, which denies when the daemon cannot
answer. The control installs without ``--fail-closed`` (http hooks): the
same ``curl`` runs, so the check can fail.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from tests.hooks._agents import fake_server, requests
from tests.hooks.test_real_agents import HARNESS as CC_HARNESS
from tests.hooks.test_real_agents import _claude, _run_claude
from tests.hooks.test_real_agents_guard import Trap
from tests.hooks.test_real_agents_guard import trap_fixture as trap_fixture

pytestmark = pytest.mark.slow


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _session(trap: Trap, tmp_path: Path, *flags: str) -> list[dict[str, object]]:
    """``hook install claude-code --user --server URL FLAGS`` (nothing at
    URL), then a session whose model calls ``curl`` once."""
    home = tmp_path / "home"
    home.mkdir()
    url = f"http://127.0.0.1:{_closed_port()}"
    argv = ["hook", "install", "claude-code", "--user", "--server", url, *flags]
    install = subprocess.run(
        [sys.executable, "-m", "trajgrade", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "HOME": str(home)},
    )
    assert install.returncode == 0, install.stderr
    work = tmp_path / "work"
    work.mkdir()
    bash = {"name": "Bash", "input": {"command": f"curl -s {trap.url}"}}
    turns = [{"text": "Fetching.", "tool_use": bash}, {"text": "done"}]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": turns, "side_text": "Daemon down"}))
    srv = tmp_path / "srv"
    with fake_server(CC_HARNESS / "fake_anthropic.py", script, srv) as port:
        out = _run_claude(_claude(), port, work, home, None)
    told = [r for r in requests(srv) if r.get("kind") == "main turn 1"]
    assert told, "the model was never asked for a second turn"
    return [*out, {"told": json.dumps(told[0]["body"])}]


def test_fail_closed_denies_every_call_when_the_daemon_is_down(
    trap: Trap, tmp_path: Path
) -> None:
    out = _session(trap, tmp_path, "--fail-closed")
    assert not trap.ran.exists(), trap.ran.read_text()
    assert trap.hits == []
    told = str(out[-1]["told"])
    assert "could not grade this call and runs fail-closed" in told
    settings = json.loads((tmp_path / "home/.claude/settings.json").read_text())
    handlers = [h for gs in settings["hooks"].values() for g in gs for h in g["hooks"]]
    assert {h["type"] for h in handlers} == {"command"}
    assert all(h["command"].endswith("--fail-closed") for h in handlers)


def test_control_http_hooks_run_the_call_when_the_daemon_is_down(
    trap: Trap, tmp_path: Path
) -> None:
    """Without --fail-closed (the http hooks the old install wrote with it
    too) Claude Code runs the call: the stub logs it."""
    _session(trap, tmp_path)
    assert trap.ran.exists() or trap.hits
