"""`trajgrade hook install` merges into settings files and never clobbers."""

from __future__ import annotations

import json
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
