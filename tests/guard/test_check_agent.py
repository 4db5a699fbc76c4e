"""`trajgrade check --agent` and `hook install`: matchers that cannot work on
an agent are named, with the entry and what to do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tests._support import suite

from trajgrade.config.agent_check import agent_warnings

ROOT = Path(__file__).resolve().parents[2]
GUARD = ROOT / "src" / "trajgrade" / "examples" / "guard.yaml"

# The README's old policy, written for canonical names, checked per agent.
POLICY = """\
graders:
  - type: tool-calls
    name: legacy
    config:
      disallowed:
        - {name: "^(Read|view)$", path: "(^|/)\\\\.env$"}
        - {name: "^bash$", command: "rm -rf"}
        - {name: ".", path: "secret"}
        - {name: "^exec_command$", args: {command: "curl"}}
        - {kind: shell, program: "^curl$"}
        - {name: "^mcp__", args: {anything: "x"}}
"""


def _warnings(agent: str) -> list[str]:
    return agent_warnings(suite(POLICY), agent)


def test_a_name_that_matches_none_of_the_agents_tools() -> None:
    got = _warnings("codex")
    assert any(
        w.startswith("legacy: disallowed[0] ") and "matches none of codex's tools" in w
        for w in got
    ), got
    assert any("disallowed[1] " in w and "never matches on codex" in w for w in got)


def test_a_view_the_selected_tools_lack_would_be_an_error() -> None:
    got = _warnings("claude-code")
    line = next(w for w in got if "disallowed[2] " in w)
    assert "filters on 'path'" in line
    assert "Bash" in line and "error verdict" in line
    # Read has file_path: the README policy is fine on Claude Code now.
    assert not any("disallowed[0] " in w for w in got)


def test_an_argument_the_tool_never_takes() -> None:
    got = _warnings("codex")
    line = next(w for w in got if "disallowed[3] " in w)
    assert "args.command" in line and "use the command: view" in line


def test_kind_and_mcp_entries_are_clean() -> None:
    for agent in ("claude-code", "codex", "gemini"):
        assert not any("disallowed[4] " in w for w in _warnings(agent))
    # MCP tools are `mcp__<server>__<tool>` on Claude Code and Codex only.
    for agent in ("claude-code", "codex"):
        assert not any("disallowed[5] " in w for w in _warnings(agent))
    assert any("disallowed[5] " in w for w in _warnings("gemini"))


@pytest.mark.parametrize("agent", ["claude-code", "codex", "gemini", "openhands"])
def test_the_example_guard_is_clean_for_the_hook_agents(agent: str) -> None:
    assert agent_warnings(suite(GUARD.read_text()), agent) == []


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trajgrade", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


def test_check_prints_the_warnings_and_still_passes(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    proc = _cli("check", "-c", str(policy), "--agent", "gemini", "--agent", "codex")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert any(
        line.startswith("warning: gemini: legacy: disallowed[0] ") for line in lines
    )
    assert any(
        line.startswith("warning: codex: legacy: disallowed[3] ") for line in lines
    )
    assert "ok, 1 grader(s)" in proc.stdout
    bad = _cli("check", "-c", str(policy), "--agent", "cursor")
    assert bad.returncode == 2 and "cursor" in bad.stderr


def test_hook_install_warns_too(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    proc = _cli(
        "hook", "install", "gemini", "-c", str(policy), "--dry-run", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert "warning: gemini: legacy: disallowed[1] " in proc.stderr
    assert "would write" in proc.stdout


FLOW = """\
graders:
  - type: flow
    name: typo
    config:
      after: {kind: read}
      bind: file_pth
      forbid: {kind: shell}
      if_bound: comand
  - type: flow
    name: fine
    config:
      after: {kind: read}
      bind: path
      forbid: {kind: write}
      unless_bound: file_path
"""


@pytest.mark.parametrize("agent", ["claude-code", "gemini"])
def test_a_flow_binding_that_no_tool_of_its_matcher_takes(agent: str) -> None:
    """A misspelt ``bind`` binds nothing and a misspelt ``if_bound`` never
    refuses: the rule silently guards nothing. Views (``path``) and real
    arguments (``file_path`` of the write tools) are fine."""
    got = agent_warnings(suite(FLOW), agent)
    assert len(got) == 2, got
    bind, if_bound = got
    assert bind.startswith("typo: bind: 'file_pth' is an argument none of")
    assert "selected by after {kind: 'read'}" in bind
    assert bind.endswith(f"so nothing is ever bound on {agent}")
    assert if_bound.startswith("typo: if_bound: 'comand'")
    assert if_bound.endswith(f"so it never refuses a call on {agent}")
