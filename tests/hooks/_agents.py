"""Helpers for the real-agent end-to-end hook tests (Codex, Gemini CLI).

Same pattern as ``test_real_agents.py`` (Claude Code): the agent comes from
npm at the version the recorded corpus used, installed into
``$TRAJGRADE_AGENTS_DIR`` (default ``/tmp/trajgrade-agents``) with
``--ignore-scripts``; when it is absent and cannot be installed, the test is
skipped and says why. The scripted fake model server is the corpus harness,
started on a loopback port and stopped by its PID.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from tests._first_use import once

if TYPE_CHECKING:
    from collections.abc import Iterator

AGENTS_DIR = Path(os.environ.get("TRAJGRADE_AGENTS_DIR", "/tmp/trajgrade-agents"))


def npm_agent(prefix: str, package: str, version: str, exe: str) -> Path:
    """``exe`` (relative to the install prefix) of ``package@version``,
    installed into ``$TRAJGRADE_AGENTS_DIR/prefix`` when missing (before the
    first test: tests/_first_use.py); skips the test, naming the reason,
    when that cannot be done."""
    return once(
        f"{package}@{version} in {AGENTS_DIR / prefix}",
        lambda: _npm_install(prefix, package, version, exe),
    )


def _npm_install(prefix: str, package: str, version: str, exe: str) -> Path:
    if shutil.which("node") is None:
        pytest.skip(
            f"real-agent test skipped: node is not installed, so {package} cannot run"
        )
    root = AGENTS_DIR / prefix
    path = root / exe
    if path.exists() and _installed_version(root, package) == version:
        return path
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip(
            f"real-agent test skipped: npm is not installed, so {package} cannot be fetched"
        )
    root.mkdir(parents=True, exist_ok=True)
    try:
        proc = subprocess.run(
            [
                npm,
                "install",
                "--no-audit",
                "--no-fund",
                "--ignore-scripts",
                f"{package}@{version}",
            ],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=600,  # outside test timeouts: tests/_first_use.py
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.skip(f"real-agent test skipped: npm install of {package} timed out")
    got = _installed_version(root, package)
    if proc.returncode != 0 or not path.exists() or got != version:
        pytest.skip(
            f"real-agent test skipped: npm could not install {package}@{version} "
            f"(got {got!r}, {exe} {'present' if path.exists() else 'missing'}): "
            f"{proc.stderr[-300:]}"
        )
    return path


def _installed_version(root: Path, package: str) -> str | None:
    try:
        meta = json.loads(
            (root / "node_modules" / package / "package.json").read_text()
        )
    except (OSError, ValueError):
        return None
    version = meta.get("version")
    return version if isinstance(version, str) else None


@contextmanager
def fake_server(server: Path, script: Path, srv: Path) -> Iterator[int]:
    """Run the harness's fake model ``server`` with ``script``; its port.

    The server writes its port to ``srv/port`` and logs every request to
    ``srv/requests.jsonl``; it is stopped by its PID.
    """
    proc = subprocess.Popen(
        [sys.executable, str(server), str(script), str(srv)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port_file = srv / "port"
        deadline = time.monotonic() + 10
        while not (port_file.exists() and port_file.read_text()):
            assert proc.poll() is None, "fake model server exited"
            assert time.monotonic() < deadline, "fake model server did not start"
            time.sleep(0.05)
        yield int(port_file.read_text())
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


def base_env(home: Path) -> dict[str, str]:
    """A clean environment: temp HOME, no real network (a dead proxy)."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "TERM": "dumb",
        "LANG": "C.UTF-8",
        "HOME": str(home),
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "HTTP_PROXY": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1,localhost",
    }


def hook_command(
    agent: str, policy: Path, state: Path, verdicts: Path, log: Path
) -> str:
    """``python -m trajgrade hook AGENT -c POLICY …`` as a shell command
    whose stderr goes to ``log`` (the agent may swallow it). Decisions go to
    ``decisions.jsonl`` beside ``verdicts``."""
    return " ".join(
        [
            sys.executable,
            "-m",
            "trajgrade",
            "hook",
            agent,
            "-c",
            str(policy),
            "--state-dir",
            str(state),
            "--verdicts",
            str(verdicts),
            "--decisions",
            str(verdicts.with_name("decisions.jsonl")),
            "2>>" + str(log),
        ]
    )


def final_verdicts(path: Path) -> dict[str, str]:
    """grader -> outcome of the final verdicts written by the hook."""
    if not path.exists():
        return {}
    return {
        v["grader"]: v["outcome"]
        for v in map(json.loads, path.read_text().splitlines())
        if v["final"]
    }


def requests(srv: Path) -> list[dict[str, Any]]:
    """What the fake model server was asked, in order."""
    path = srv / "requests.jsonl"
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines()]


def jsonl(text: str) -> list[dict[str, Any]]:
    """The JSON object lines of an agent's stdout."""
    return [json.loads(x) for x in text.splitlines() if x.startswith("{")]


def assert_hook_ran_cleanly(tmp_path: Path, agent: str) -> None:
    """After a real agent's run: it called ``trajgrade hook`` (whose stderr
    ``hook_command`` sends to ``hook.err``), no call hit an error (fail-open
    would hide it), and SessionEnd reached trajgrade, which marked the
    session's state ended."""
    err = tmp_path / "hook.err"  # created by the first hook call
    assert err.exists(), "the agent never ran the trajgrade hook"
    assert err.read_text() == ""
    # A SessionEnd keeps the session's state, marked ended (a forged end
    # must not erase what the session did), until the age sweep.
    import msgspec

    from trajgrade._util.sealed import unseal
    from trajgrade.hooks.session import SessionState

    for path in (tmp_path / "state" / agent).glob("*.state"):
        state = msgspec.msgpack.decode(unseal(path.read_bytes()), type=SessionState)
        assert state.ended, f"{path.name}: SessionEnd did not reach trajgrade"
