"""End to end: the real Claude Code CLI, offline against a scripted fake model,
with ``trajgrade hook`` registered as its hook.

The agent comes from npm (``@anthropic-ai/claude-code@2.1.197``, the version
the recorded corpus used) installed into ``$TRAJGRADE_AGENTS_DIR`` (default
``/tmp/trajgrade-agents``); when it is absent and cannot be installed, the
test is skipped and says why. The fake server and its script are the
corpus harness (``tests/fixtures/hooks/claude-code/harness``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from tests._first_use import once
from tests.hooks._replay import FIXTURES

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.slow

AGENTS_DIR = Path(os.environ.get("TRAJGRADE_AGENTS_DIR", "/tmp/trajgrade-agents"))
CLAUDE_VERSION = "2.1.197"
#: The newest Claude Code checked too (the guard; ``onFailure`` on hooks).
LATEST_CLAUDE = "2.1.331"
HARNESS = FIXTURES / "claude-code" / "harness"


def _claude(version: str = CLAUDE_VERSION) -> Path:
    """The ``claude`` binary of ``version`` (installed once from npm, before
    the first test: tests/_first_use.py)."""
    return once(
        f"@anthropic-ai/claude-code@{version}", lambda: _install_claude(version)
    )


def _install_claude(version: str) -> Path:
    prefix = AGENTS_DIR / ("cc" if version == CLAUDE_VERSION else f"cc-{version}")
    exe = prefix / "node_modules" / "@anthropic-ai" / "claude-code-linux-x64" / "claude"
    if exe.exists():
        return exe
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip(
            "real-agent test skipped: npm is not installed, so @anthropic-ai/claude-code cannot be fetched"
        )
    prefix.mkdir(parents=True, exist_ok=True)
    try:
        proc = subprocess.run(
            [
                npm,
                "install",
                "--no-audit",
                "--no-fund",
                "--ignore-scripts",
                f"@anthropic-ai/claude-code@{version}",
            ],
            cwd=prefix,
            capture_output=True,
            text=True,
            timeout=600,  # outside test timeouts: tests/_first_use.py
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.skip(
            "real-agent test skipped: npm install of @anthropic-ai/claude-code timed out"
        )
    if proc.returncode != 0 or not exe.exists():
        pytest.skip(
            f"real-agent test skipped: npm could not install @anthropic-ai/claude-code@{version}: {proc.stderr[-300:]}"
        )
    return exe


@pytest.fixture(name="fake_model")
def fake_model_fixture(tmp_path: Path) -> Iterator[tuple[int, Path, Path]]:
    work = tmp_path / "work"
    work.mkdir()
    script = tmp_path / "script.json"
    script.write_text(
        (HARNESS / "cc_script.json").read_text().replace("__WORK__", str(work))
    )
    srv = tmp_path / "srv"
    proc = subprocess.Popen(
        [sys.executable, str(HARNESS / "fake_anthropic.py"), str(script), str(srv)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port_file = srv / "port"
        deadline = time.monotonic() + 10
        while not (port_file.exists() and port_file.read_text()):
            assert time.monotonic() < deadline, "fake model server did not start"
            time.sleep(0.05)
        yield int(port_file.read_text()), work, srv
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


def _run_claude(
    exe: Path, port: int, work: Path, home: Path, hook: str | None
) -> list[dict[str, object]]:
    """One ``claude -p`` session; ``hook`` registered for every event, or
    None: ``home``'s settings are there already (``hook install``)."""
    if hook is not None:
        _register(home, hook)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "TERM": "dumb",
        "LANG": "C.UTF-8",
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}",
        "ANTHROPIC_API_KEY": "dummy-key-for-fake-server",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "HTTP_PROXY": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    proc = subprocess.run(
        [
            str(exe),
            "-p",
            "do the task",
            "--output-format",
            "stream-json",
            "--verbose",
            "--allowedTools",
            "Bash Write Edit Read",
            "--permission-mode",
            "acceptEdits",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    assert lines, proc.stderr[-2000:]
    return lines


def _register(home: Path, hook: str) -> None:
    """``hook`` as Claude Code's command hook for every event it has."""
    (home / ".claude").mkdir(parents=True)
    entry = [{"hooks": [{"type": "command", "command": hook}]}]
    hooks: dict[str, Any] = {
        e: [{**entry[0], "matcher": "*"}]
        for e in ("PreToolUse", "PostToolUse", "PostToolUseFailure")
    }
    hooks |= dict.fromkeys(
        ("UserPromptSubmit", "Stop", "SessionStart", "SessionEnd"), entry
    )
    (home / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}))


def _hook(policy: Path, state: Path, verdicts: Path) -> str:
    return " ".join(
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
            "--verdicts",
            str(verdicts),
        ]
    )


def test_claude_code_disallowed_write_is_blocked(
    fake_model: tuple[int, Path, Path], tmp_path: Path
) -> None:
    """The policy forbids writing note.txt: Claude Code never writes it and the run goes on."""
    exe = _claude()
    port, work, _ = fake_model
    policy = tmp_path / "p.yaml"
    policy.write_text(
        'graders:\n  - type: tool-calls\n    name: no-notes\n    config:\n      disallowed:\n        - {name: "^Write$", args: {file_path: "note\\\\.txt$"}}\n'
    )
    verdicts = tmp_path / "v.jsonl"
    out = _run_claude(
        exe, port, work, tmp_path / "home", _hook(policy, tmp_path / "state", verdicts)
    )
    assert not (work / "note.txt").exists()
    result = out[-1]
    assert result["type"] == "result"
    assert result["result"] == "done"  # denied, not stopped: the session went on
    denials: Any = result.get("permission_denials", [])
    assert any(d.get("tool_name") == "Write" for d in denials)
    finals = {
        v["grader"]: v["outcome"]
        for v in map(json.loads, verdicts.read_text().splitlines())
        if v["final"]
    }
    assert finals == {"no-notes": "fail", "protect": "pass"}  # + the built-in guard


def test_claude_code_budget_ends_the_run(
    fake_model: tuple[int, Path, Path], tmp_path: Path
) -> None:
    """A tool-call budget of 1: the 2nd call ends the session; the 3rd turn never comes."""
    exe = _claude()
    port, work, srv = fake_model
    policy = tmp_path / "p.yaml"
    policy.write_text("graders:\n  - type: tool-call-count\n    config: {max: 1}\n")
    out = _run_claude(
        exe,
        port,
        work,
        tmp_path / "home",
        _hook(policy, tmp_path / "state", tmp_path / "v.jsonl"),
    )
    result = out[-1]
    assert result["type"] == "result"
    assert result.get("terminal_reason") == "hook_stopped"
    assert not (work / "note.txt").exists()  # turn 3 (the Write) never happened
    requests = (srv / "requests.jsonl").read_text().splitlines()
    assert len([r for r in requests if '"main turn' in r]) == 2
