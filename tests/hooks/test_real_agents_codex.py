"""End to end: the real Codex CLI, offline against a scripted fake model,
with ``trajgrade hook codex`` registered as its hook.

The agent comes from npm (``@openai/codex@0.169.0``, the version the
recorded corpus used) installed into ``$TRAJGRADE_AGENTS_DIR`` (default
``/tmp/trajgrade-agents``); when it is absent and cannot be installed, the
test is skipped and says why. The fake Responses API server and its script
are the corpus harness (``tests/fixtures/hooks/codex/harness``); the hook
registration is what ``trajgrade hook install codex`` writes
(``$CODEX_HOME/hooks.json``).

What Codex does with a hook answer (``corpus/codex-live/README.md``): only
a deny with a non-empty reason blocks a call, and the model gets "Command
blocked by PreToolUse hook: <reason>" as the call's output and goes on; any
``continue: false`` makes Codex discard the whole answer. So trajgrade
cannot end a Codex run: a budget blown denies every further call (the
reason says the run was stopped) and the model runs out of things to do.
Hooks run only when trusted, hence ``--dangerously-bypass-hook-trust``.
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

CODEX_VERSION = "0.169.0"
HARNESS = FIXTURES / "codex" / "harness"
BLOCKED = "Command blocked by PreToolUse hook: "


def _codex() -> Path:
    return npm_agent("codex", "@openai/codex", CODEX_VERSION, "node_modules/.bin/codex")


class Run:
    """One finished Codex run."""

    def __init__(self, proc: subprocess.CompletedProcess[str], srv: Path) -> None:
        self.proc = proc
        self.events = jsonl(proc.stdout)
        self.requests = [r for r in requests(srv) if "main turn" in r.get("kind", "")]

    def commands(self) -> list[str]:
        """Shell commands Codex ran (completed ``command_execution`` items)."""
        return [
            e["item"]["command"]
            for e in self.events
            if e["type"] == "item.completed"
            and e["item"]["type"] == "command_execution"
        ]

    def outputs(self) -> list[str]:
        """What the model got back for each call, from the last request."""
        last: list[dict[str, Any]] = self.requests[-1]["body"]["input"]
        return [
            str(i.get("output"))
            for i in last
            if i.get("type") in ("function_call_output", "custom_tool_call_output")
        ]

    def last_message(self) -> str:
        return [
            str(e["item"]["text"])
            for e in self.events
            if e["type"] == "item.completed" and e["item"]["type"] == "agent_message"
        ][-1]


@pytest.fixture(name="codex_run")
def codex_run_fixture(tmp_path: Path) -> tuple[Any, Path]:
    """A function running Codex with ``trajgrade hook codex -c POLICY``
    against the corpus script (or ``script``), and the work directory."""
    exe = _codex()
    work = tmp_path / "work"
    work.mkdir()

    def run(policy_text: str, script: Path = HARNESS / "codex_script.json") -> Run:
        policy = tmp_path / "p.yaml"
        policy.write_text(policy_text)
        home = tmp_path / "home"
        codex_home = home / "codex_home"
        codex_home.mkdir(parents=True)
        command = hook_command(
            "codex",
            policy,
            tmp_path / "state",
            tmp_path / "v.jsonl",
            tmp_path / "hook.err",
        )
        (codex_home / "hooks.json").write_text(
            json.dumps(merged({}, "codex", command=command))
        )
        env = base_env(home) | {
            "CODEX_HOME": str(codex_home),
            "FAKE_OPENAI_API_KEY": "dummy-key-for-fake-server",
        }
        srv = tmp_path / "srv"
        with fake_server(HARNESS / "fake_openai.py", script, srv) as port:
            (codex_home / "config.toml").write_text(
                (HARNESS / "config.toml").read_text().replace("PORT", str(port))
            )
            proc = subprocess.run(
                [
                    str(exe),
                    "exec",
                    "--json",
                    "--skip-git-repo-check",
                    "--dangerously-bypass-hook-trust",
                    "do the task",
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
        assert_hook_ran_cleanly(tmp_path, "codex")
        return out

    return run, work


def test_codex_disallowed_patch_is_blocked(
    codex_run: tuple[Any, Path], tmp_path: Path
) -> None:
    """The policy forbids apply_patch: note.txt is never written, the model
    is told why, and the session goes on to its last call and "done"."""
    run, work = codex_run
    out = run(
        "graders:\n  - type: tool-calls\n    name: no-patches\n"
        '    config:\n      disallowed: ["^apply_patch$"]\n'
    )
    assert not (work / "note.txt").exists()
    assert not any(
        e["type"] == "item.completed" and e["item"]["type"] == "file_change"
        for e in out.events
    )
    # denied, not stopped: the shell calls around it ran and the run finished
    assert [c.split("-lc ", 1)[-1] for c in out.commands()] == [
        "'echo hello'",
        "'cat /etc/hostname'",
        "'ls /nonexistent-trajgrade-path'",
    ]
    assert out.last_message() == "done"
    assert len(out.requests) == 5
    patch_out = out.outputs()[2]
    assert patch_out.startswith(BLOCKED + "trajgrade denied this call: ")
    assert "no-patches" in patch_out
    assert final_verdicts(tmp_path / "v.jsonl") == {
        "no-patches": "fail",
        "protect": "pass",
    }


def test_codex_budget_denies_every_further_call(
    codex_run: tuple[Any, Path], tmp_path: Path
) -> None:
    """A tool-call budget of 1 (a budget aborts by default): Codex cannot be
    stopped by a hook, so the 2nd call and every later one is denied with
    the stop reason; only the 1st call runs and note.txt never appears."""
    run, work = codex_run
    out = run("graders:\n  - type: tool-call-count\n    config: {max: 1}\n")
    assert [c.split("-lc ", 1)[-1] for c in out.commands()] == ["'echo hello'"]
    assert not (work / "note.txt").exists()
    outputs = out.outputs()
    assert len(outputs) == 4
    for o in outputs[1:]:
        assert o.startswith(BLOCKED + "trajgrade stopped this run: ")
        assert "tool-call-count" in o
    # Codex itself goes on: the model gets its next turn after each denial
    assert out.last_message() == "done"
    assert out.proc.returncode == 0  # Codex reports success: only the verdicts tell
    assert final_verdicts(tmp_path / "v.jsonl") == {
        "tool-call-count": "fail",
        "protect": "pass",
    }


def test_codex_disallowed_shell_command_is_blocked(
    codex_run: tuple[Any, Path], tmp_path: Path
) -> None:
    """A policy written for the rollout's spelling (``exec_command`` with
    ``cmd``) blocks the live call Codex's hook names ``Bash`` with
    ``command``: the command never runs (its marker file is absent)."""
    run, work = codex_run
    script = json.loads((HARNESS / "codex_script.json").read_text())
    script["turns"][1] = {"text": "Leaving a marker.", "shell": "touch marker.txt"}
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    out = run(
        "graders:\n  - type: tool-calls\n    name: no-markers\n    config:\n"
        '      disallowed:\n        - {name: "^exec_command$", args: {cmd: "marker"}}\n',
        path,
    )
    assert not (work / "marker.txt").exists()
    assert "touch marker.txt" not in " ".join(out.commands())
    assert (work / "note.txt").exists()  # the patch after it was applied
    assert out.outputs()[1].startswith(BLOCKED + "trajgrade denied this call: ")
    assert out.last_message() == "done"
    assert final_verdicts(tmp_path / "v.jsonl") == {
        "no-markers": "fail",
        "protect": "pass",
    }
