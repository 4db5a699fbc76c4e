"""End to end: the real Gemini CLI, offline against a scripted fake model,
with ``trajgrade hook gemini`` registered as its hook.

The agent comes from npm (``@google/gemini-cli@0.61.0``, the version the
recorded corpus used) installed into ``$TRAJGRADE_AGENTS_DIR`` (default
``/tmp/trajgrade-agents``); when it is absent and cannot be installed, the
test is skipped and says why. The fake Gemini API server and its script are
the corpus harness (``tests/fixtures/hooks/gemini-cli/harness``); the
settings are the corpus run's (``corpus/gemini-cli-live/harness/settings.json``)
with the hooks ``trajgrade hook install gemini`` writes.

What Gemini CLI does with a hook answer (``corpus/gemini-cli-live/README.md``):
a top-level ``decision: "deny"`` blocks the call, the model gets "Tool
execution blocked: <reason>" and goes on; ``continue: false`` on
``BeforeTool`` ends the run before the tool runs.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from tests.hooks._agents import (
    assert_hook_ran_cleanly,
    base_env,
    fake_server,
    final_verdicts,
    hook_command,
    jsonl,
    npm_agent,
    requests,
)
from tests.hooks._replay import FIXTURES

from trajgrade.hooks.install import merged

pytestmark = pytest.mark.slow

GEMINI_VERSION = "0.61.0"
HARNESS = FIXTURES / "gemini-cli" / "harness"
#: ``harness/settings.json`` of the corpus run, without its logging hooks.
SETTINGS = {
    "security": {
        "auth": {"selectedType": "gemini-api-key"},
        "folderTrust": {"enabled": False},
    },
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
}


def _gemini() -> Path:
    return npm_agent(
        "gemini", "@google/gemini-cli", GEMINI_VERSION, "node_modules/.bin/gemini"
    )


class Run:
    """One finished Gemini CLI run."""

    def __init__(self, proc: subprocess.CompletedProcess[str], srv: Path) -> None:
        self.proc = proc
        self.events = jsonl(proc.stdout)
        self.requests = [r for r in requests(srv) if "main turn" in r.get("kind", "")]

    def tools(self) -> list[tuple[str, str, str | None]]:
        """(tool, status, error type) of every ``tool_result``, with its call."""
        names = {
            e["tool_id"]: e["tool_name"] for e in self.events if e["type"] == "tool_use"
        }
        return [
            (names[e["tool_id"]], e["status"], (e.get("error") or {}).get("type"))
            for e in self.events
            if e["type"] == "tool_result"
        ]

    def text(self) -> str:
        return "".join(
            e["content"]
            for e in self.events
            if e["type"] == "message" and e["role"] == "assistant"
        )


@pytest.fixture(name="gemini_run")
def gemini_run_fixture(tmp_path: Path) -> tuple[Any, Path]:
    """A function running Gemini CLI with ``trajgrade hook gemini -c POLICY``
    against the corpus script (or ``script``: ``__WORK__`` is the work
    directory), and the work directory."""
    exe = _gemini()
    work = tmp_path / "work"
    work.mkdir()

    def run(policy_text: str, script_text: str | None = None) -> Run:
        script = tmp_path / "script.json"
        text = script_text or (HARNESS / "gemini_script.json").read_text()
        script.write_text(text.replace("__WORK__", str(work)))
        policy = tmp_path / "p.yaml"
        policy.write_text(policy_text)
        home = tmp_path / "home"
        (home / ".gemini").mkdir(parents=True)
        command = hook_command(
            "gemini",
            policy,
            tmp_path / "state",
            tmp_path / "v.jsonl",
            tmp_path / "hook.err",
        )
        (home / ".gemini" / "settings.json").write_text(
            json.dumps(merged(SETTINGS, "gemini", command=command))
        )
        srv = tmp_path / "srv"
        with fake_server(HARNESS / "fake_gemini.py", script, srv) as port:
            env = base_env(home) | {
                "GEMINI_API_KEY": "dummy-key-for-fake-server",
                "GOOGLE_GEMINI_BASE_URL": f"http://127.0.0.1:{port}",
            }
            proc = subprocess.run(
                [
                    str(exe),
                    "-p",
                    "do the task",
                    "--output-format",
                    "stream-json",
                    "--yolo",
                ],
                cwd=work,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=90,
                check=False,
            )
        out = Run(proc, srv)
        assert out.events, proc.stderr[-2000:]
        assert_hook_ran_cleanly(tmp_path, "gemini")
        return out

    return run, work


def test_gemini_disallowed_write_is_blocked(
    gemini_run: tuple[Any, Path], tmp_path: Path
) -> None:
    """The policy forbids writing note.txt: Gemini never writes it, the model
    is told why, and the session goes on to its last call and "done"."""
    run, work = gemini_run
    out = run(
        "graders:\n  - type: tool-calls\n    name: no-notes\n    config:\n"
        '      disallowed:\n        - {name: "^write_file$", args: {file_path: "note\\\\.txt$"}}\n'
    )
    assert not (work / "note.txt").exists()
    assert out.tools() == [
        ("run_shell_command", "success", None),
        ("run_shell_command", "success", None),
        ("write_file", "error", "policy_violation"),
        ("run_shell_command", "success", None),
    ]
    assert out.events[-1]["type"] == "result"
    assert out.events[-1]["status"] == "success"
    assert out.text().endswith("done")
    assert len(out.requests) == 5  # denied, not stopped: every turn came
    blocked = [
        p["functionResponse"]["response"]
        for c in out.requests[3]["body"]["contents"]
        for p in c.get("parts") or []
        if "functionResponse" in p and p["functionResponse"]["name"] == "write_file"
    ]
    assert len(blocked) == 1
    assert blocked[0]["error"].startswith(
        "Tool execution blocked: trajgrade denied this call: "
    )
    assert "no-notes" in blocked[0]["error"]
    assert final_verdicts(tmp_path / "v.jsonl") == {
        "no-notes": "fail",
        "protect": "pass",
    }


def test_gemini_budget_ends_the_run(
    gemini_run: tuple[Any, Path], tmp_path: Path
) -> None:
    """A tool-call budget of 1 (a budget aborts by default): the 2nd call
    stops the run before it executes; no further model turn comes."""
    run, work = gemini_run
    out = run("graders:\n  - type: tool-call-count\n    config: {max: 1}\n")
    assert out.tools() == [
        ("run_shell_command", "success", None),
        ("run_shell_command", "error", "stop_execution"),
    ]
    stopped = [e for e in out.events if e["type"] == "tool_result"][-1]
    assert "trajgrade stopped this run" in stopped["error"]["message"]
    assert not (work / "note.txt").exists()  # turn 3 (the write) never came
    assert len(out.requests) == 2
    assert "done" not in out.text()
    # Gemini reports the stopped run as a success: only the verdicts tell
    assert out.events[-1]["type"] == "result"
    assert out.events[-1]["status"] == "success"
    assert out.proc.returncode == 0
    assert final_verdicts(tmp_path / "v.jsonl") == {
        "tool-call-count": "fail",
        "protect": "pass",
    }
