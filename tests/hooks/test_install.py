"""`trajgrade hook install` merges into settings files and never clobbers."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trajgrade.errors import ConfigError
from trajgrade.hooks.install import install, merged


def test_merge_keeps_other_settings_and_hooks() -> None:
    """Existing keys and other hooks stay; ours are added once per event."""
    before: dict[str, Any] = {
        "model": "x",
        "hooks": {
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [{"type": "command", "command": "other"}]}
            ]
        },
    }
    after = merged(
        before, "claude-code", command="/venv/bin/trajgrade hook claude-code -c /p.yaml"
    )
    assert after["model"] == "x"
    pre = after["hooks"]["PreToolUse"]
    assert pre[0] == before["hooks"]["PreToolUse"][0]
    assert pre[1] == {
        "hooks": [
            {
                "type": "command",
                "command": "/venv/bin/trajgrade hook claude-code -c /p.yaml",
            }
        ],
        "matcher": "*",
    }
    assert set(after["hooks"]) >= {"SessionStart", "PostToolUseFailure", "SessionEnd"}


def test_install_twice_replaces_in_place(tmp_path: Path) -> None:
    """Installing again (a new policy) updates our entry instead of adding one."""
    install(
        "gemini",
        user=False,
        command="trajgrade hook gemini -c /a.yaml",
        cwd=str(tmp_path),
    )
    path, _ = install(
        "gemini",
        user=False,
        command="trajgrade hook gemini -c /b.yaml",
        cwd=str(tmp_path),
    )
    data = json.loads(Path(path).read_text())
    before = data["hooks"]["BeforeTool"]
    assert len(before) == 1
    assert before[0]["hooks"] == [
        {
            "type": "command",
            "command": "trajgrade hook gemini -c /b.yaml",
            "name": "trajgrade",
            "timeout": 30000,
        }
    ]


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    """--dry-run returns the merged text and leaves the disk alone."""
    path, text = install(
        "claude-code",
        user=False,
        command="trajgrade hook claude-code -c /p",
        dry_run=True,
        cwd=str(tmp_path),
    )
    assert not Path(path).exists()
    assert "PreToolUse" in json.loads(text)["hooks"]


def test_broken_settings_file_is_refused(tmp_path: Path) -> None:
    """A settings file that is not JSON is left untouched and named in the error."""
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{oops")
    with pytest.raises(ConfigError, match="not valid JSON"):
        install("claude-code", user=False, command="c", cwd=str(tmp_path))
    assert settings.read_text() == "{oops"


def test_codex_needs_user_scope() -> None:
    """Codex reads hooks from CODEX_HOME only: --project is refused with the fix."""
    with pytest.raises(ConfigError, match="use --user"):
        install("codex", user=False, command="c")


def test_http_url_for_claude_code() -> None:
    """With a server, Claude Code gets http hooks (SessionStart keeps a command)."""
    after = merged(
        {},
        "claude-code",
        command="trajgrade hook claude-code --server http://127.0.0.1:1",
        url="http://127.0.0.1:1/hook/claude-code",
    )
    assert after["hooks"]["PreToolUse"][0]["hooks"][0]["type"] == "http"
    assert after["hooks"]["SessionStart"][0]["hooks"][0]["type"] == "command"


@pytest.mark.parametrize("agent", ["claude-code", "codex", "gemini"])
def test_fail_closed_asks_claude_code_to_block_a_failed_gate(agent: str) -> None:
    """``onFailure: block`` on Claude Code's PreToolUse hook only: on Stop
    it would keep the agent going; other agents have no such key."""
    hooks = merged({}, agent, command="trajgrade hook x", fail_closed=True)["hooks"]
    marked = {
        event
        for event, groups in hooks.items()
        for g in groups
        for h in g["hooks"]
        if "onFailure" in h
    }
    assert marked == ({"PreToolUse"} if agent == "claude-code" else set())
    assert "onFailure" not in str(merged({}, agent, command="trajgrade hook x"))


def test_codex_session_end_timeout_is_within_codex_limit() -> None:
    """Codex clamps a SessionEnd hook above 3 s (with a warning in every
    ``codex exec --json`` stream); the other events keep 30 s."""
    from trajgrade.hooks.install import merged

    hooks = merged({}, "codex", command="trajgrade hook codex -c p.yaml")["hooks"]
    timeouts = {
        event: groups[0]["hooks"][0]["timeout"] for event, groups in hooks.items()
    }
    assert timeouts.pop("SessionEnd") == 3
    assert set(timeouts.values()) == {30}


def _install(cwd: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    """``trajgrade hook install ARGS`` run in ``cwd`` (project settings)."""
    return _hook(cwd, "install", *args)


def _uninstall(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return _hook(cwd, "uninstall", *args)


def _hook(cwd: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    """``trajgrade hook ARGS`` in ``cwd``, with ``cwd`` as the home directory."""
    return subprocess.run(
        [sys.executable, "-m", "trajgrade", "hook", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "HOME": str(cwd)},
    )


def test_a_policy_the_hook_cannot_load_is_not_installed(tmp_path: Path) -> None:
    """A broken policy used to be installed with a warning and status 0:
    every hook call then failed open, so the agent ran unguarded. Now the
    errors are printed, the status is 2 and no settings file is written."""
    policy = tmp_path / "policy.yaml"
    policy.write_text("graders:\n  - type: tool-calls\n    confg: {disallowed: [x]}\n")
    out = _install(tmp_path, "gemini", "-c", policy)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "policy.yaml:3: graders[0].confg: unknown key `confg`" in out.stderr
    assert "not installed: the hook cannot load this policy" in out.stderr
    assert not (tmp_path / ".gemini").exists()


def test_a_policy_with_code_needs_allow_code_and_passes_it_on(tmp_path: Path) -> None:
    """A policy naming path.py:function loads only with --allow-code; install
    refuses it without (the hook would refuse it on every call) and with it
    registers a hook that has --allow-code too."""
    (tmp_path / "checks.py").write_text(
        "from trajgrade.graders.letta_tool import GradeResult, grader\n\n\n"
        "@grader\n"
        "def never(sample, submission):\n"
        "    return GradeResult(score=1.0, rationale='ok')\n"
    )
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "graders:\n  - type: letta-tool\n    config:\n"
        "      function: checks.py:never\n      extractor: last_assistant\n"
    )
    refused = _install(tmp_path, "claude-code", "-c", policy)
    assert refused.returncode == 2, refused.stderr
    assert "--allow-code" in refused.stderr
    done = _install(tmp_path, "claude-code", "-c", policy, "--allow-code")
    assert done.returncode == 0, done.stderr
    settings = json.loads((tmp_path / ".claude" / "settings.json").read_text())
    command = settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    assert f"hook claude-code -c {policy} --pin blake2b:" in command
    assert command.endswith("--allow-code --fail-closed")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--server", "localhost:8787"],
            "Invalid value for --server: expected http://HOST:PORT",
        ),
        (
            ["--server", "http://127.0.0.1:8787", "-c", "POLICY"],
            "-c with --server: the daemon has the policy",
        ),
        (
            ["--server", "http://127.0.0.1:8787", "--state-dir", "st"],
            "--state-dir with --server: the daemon has the policy and the state",
        ),
    ],
    ids=["no-scheme", "policy-with-server", "state-dir-with-server"],
)
def test_server_installs_the_hook_could_never_use_are_refused(
    tmp_path: Path, args: list[str], expected: str
) -> None:
    """`--server localhost:8787` used to be installed (Claude Code got the
    url `localhost:8787/hook/claude-code`, every call failed open), and -c
    or --state-dir beside --server were dropped without a word."""
    policy = tmp_path / "policy.yaml"
    policy.write_text("graders:\n  - type: tool-call-count\n    config: {max: 9}\n")
    args = [str(policy) if a == "POLICY" else a for a in args]
    out = _install(tmp_path, "claude-code", *args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert expected in out.stderr
    assert not (tmp_path / ".claude").exists()


def test_a_symlinked_settings_file_is_updated_through_the_link(tmp_path: Path) -> None:
    """Settings kept in a dotfiles repository and linked into place: the
    link used to be replaced by a regular file (the repository's copy never
    got the hooks, and the next dotfiles sync dropped them). Now the target
    is updated, the link stays, and the file keeps its permissions."""
    dotfiles = tmp_path / "dotfiles" / "claude-settings.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text('{"model": "x"}\n')
    dotfiles.chmod(0o600)
    link = tmp_path / "project" / ".claude" / "settings.json"
    link.parent.mkdir(parents=True)
    link.symlink_to(dotfiles)
    install(
        "claude-code",
        user=False,
        command="trajgrade hook claude-code -c /p.yaml",
        cwd=str(tmp_path / "project"),
    )
    assert link.is_symlink()
    data = json.loads(dotfiles.read_text())
    assert data["model"] == "x"
    assert "PreToolUse" in data["hooks"]
    assert dotfiles.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in dotfiles.parent.iterdir()) == [dotfiles.name]


@pytest.mark.parametrize("agent", ["claude-code", "gemini"])
def test_installing_again_replaces_a_server_install(tmp_path: Path, agent: str) -> None:
    """The --server install registers the thin client (`python …/client.py
    AGENT --server URL`), which install did not know as its own: installing
    again added a second set, so every call was forwarded, and graded,
    twice (budgets and rate limits counted double), and a switch to a cold
    hook (-c) kept the daemon's hooks beside it."""
    policy = tmp_path / "policy.yaml"
    policy.write_text("graders:\n  - type: tool-call-count\n    config: {max: 9}\n")
    folder = ".claude" if agent == "claude-code" else ".gemini"
    for _ in range(2):
        token = tmp_path / "token"
        token.write_text("t0k3n\n")
        out = _install(
            tmp_path, agent, "--server", "http://127.0.0.1:8787", "--token-file", token
        )
        assert out.returncode == 0, out.stderr
    settings = tmp_path / folder / "settings.json"
    hooks = json.loads(settings.read_text())["hooks"]
    assert all(len(groups) == 1 for groups in hooks.values()), hooks
    out = _install(tmp_path, agent, "-c", policy)
    assert out.returncode == 0, out.stderr
    hooks = json.loads(settings.read_text())["hooks"]
    commands = [
        h["command"] for groups in hooks.values() for g in groups for h in g["hooks"]
    ]
    assert all(len(groups) == 1 for groups in hooks.values()), hooks
    assert "client.py" not in settings.read_text()
    assert all(f"hook {agent} -c {policy} --pin " in c for c in commands), commands


@pytest.mark.parametrize("server", [False, True], ids=["cold", "server"])
def test_uninstall_removes_only_trajgrade_hooks(tmp_path: Path, server: bool) -> None:
    """`hook uninstall` (there was none: the hooks had to be cut out of the
    JSON by hand) removes trajgrade's entries, cold or --server, and keeps
    every other setting and hook; a second run changes nothing."""
    policy = tmp_path / "policy.yaml"
    policy.write_text("graders:\n  - type: tool-call-count\n    config: {max: 9}\n")
    settings = tmp_path / ".gemini" / "settings.json"
    settings.parent.mkdir()
    mine = {"type": "command", "command": "my-linter"}
    before = {
        "theme": "dark",
        "hooks": {"BeforeTool": [{"matcher": ".*", "hooks": [mine]}]},
    }
    settings.write_text(json.dumps(before))
    (tmp_path / "token").write_text("t0k3n\n")
    how = (
        ["--server", "http://127.0.0.1:8787", "--token-file", str(tmp_path / "token")]
        if server
        else ["-c", str(policy)]
    )
    assert _install(tmp_path, "gemini", *how).returncode == 0
    assert "trajgrade" in settings.read_text()
    dry = _uninstall(tmp_path, "gemini", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "# would write" in dry.stdout and "6 trajgrade hook(s) removed" in dry.stdout
    assert "trajgrade" in settings.read_text()  # a dry run writes nothing
    out = _uninstall(tmp_path, "gemini")
    assert out.returncode == 0, out.stderr
    assert "6 trajgrade hook(s) removed for gemini" in out.stdout
    assert json.loads(settings.read_text()) == before
    again = _uninstall(tmp_path, "gemini")
    assert again.returncode == 0
    assert "no trajgrade hooks for gemini; nothing changed" in again.stdout


def test_uninstall_refuses_a_broken_settings_file(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{oops")
    out = _uninstall(tmp_path, "claude-code")
    assert out.returncode == 2
    assert f"{settings}: not valid JSON" in out.stderr
    assert settings.read_text() == "{oops"


def _other_trajgrade(where: Path) -> Path:
    """Another installation's `trajgrade` (an older one first on PATH)."""
    where.mkdir()
    other = where / "trajgrade"
    other.write_text("#!/bin/sh\necho 'another trajgrade' >&2\nexit 3\n")
    other.chmod(0o755)
    return other


def test_install_registers_the_running_trajgrade_not_the_one_on_path(
    tmp_path: Path,
) -> None:
    """The hook command was `shutil.which("trajgrade")`: another installation
    first on PATH got every hook call, with other code than the policy was
    checked with. Now the running installation is registered (its console
    script beside the interpreter), with a warning naming the other one."""
    other = _other_trajgrade(tmp_path / "elsewhere")
    policy = tmp_path / "policy.yaml"
    policy.write_text("graders:\n  - type: tool-call-count\n    config: {max: 5}\n")
    out = subprocess.run(
        [sys.executable, "-m", "trajgrade", "hook", "install", "gemini", "-c", policy],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={
            **os.environ,
            "HOME": str(tmp_path),
            "PATH": f"{other.parent}:/usr/bin:/bin",
        },
    )
    assert out.returncode == 0, out.stderr
    settings = json.loads((tmp_path / ".gemini" / "settings.json").read_text())
    command = settings["hooks"]["BeforeTool"][0]["hooks"][0]["command"]
    ours = Path(sys.executable).parent / "trajgrade"
    expected = [str(ours)] if ours.exists() else [sys.executable, "-m", "trajgrade"]
    words = shlex.split(command)
    assert words[: len(expected) + 4] == [
        *expected,
        "hook",
        "gemini",
        "-c",
        str(policy),
    ]
    assert words[-1] == "--fail-closed"
    assert f"the `trajgrade` on PATH ({other}) is another installation" in out.stderr
    # The registered command is this trajgrade's hook: it answers a call.
    payload = {"session_id": "s", "hook_event_name": "BeforeTool", "cwd": str(tmp_path)}
    payload |= {"tool_name": "run_shell_command", "tool_input": {"command": "ls"}}
    state = ["--state-dir", str(tmp_path / "state")]
    call = subprocess.run(
        [*shlex.split(command), *state],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert call.returncode == 0, call.stderr
    assert "another trajgrade" not in call.stderr


def test_without_a_console_script_the_hook_runs_python_m_trajgrade(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An interpreter with no `trajgrade` beside it (a user-site install) is
    registered as `python -m trajgrade`; a `trajgrade` on PATH run by the same
    interpreter's directory is the same installation (no warning), any other
    one gets the warning."""
    from trajgrade.cli.hook_command import this_trajgrade

    python = tmp_path / "bin" / "python3"
    python.parent.mkdir()
    python.symlink_to(sys.executable)
    same = tmp_path / "scripts"
    same.mkdir()
    (same / "trajgrade").write_text(f"#!{python}\nfrom trajgrade._entry import main\n")
    (same / "trajgrade").chmod(0o755)
    monkeypatch.setenv("PATH", str(same))
    words = this_trajgrade(str(python), warn=True)
    assert words == [str(python), "-m", "trajgrade"]
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("PATH", str(_other_trajgrade(tmp_path / "elsewhere").parent))
    assert this_trajgrade(str(python), warn=True) == words
    assert "is another installation than this one" in capsys.readouterr().err
