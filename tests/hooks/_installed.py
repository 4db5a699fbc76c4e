"""An installed guard in a temp home: install with the real CLI, then run
the exact hook command it registered, with the recorded payloads."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

FIXTURES = (
    Path(__file__).resolve().parents[1] / "fixtures" / "hooks" / "claude-code" / "hooks"
)
#: A session that the policy stops at its second tool call.
POLICY = """\
graders:
  - type: tool-call-count
    on_fail: abort
    config: {max: 1}
"""


def payload(name: str, **changes: Any) -> dict[str, Any]:
    """A recorded Claude Code payload (``03-PreToolUse``), changed."""
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    data.update(changes)
    return data


def env(home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "HOME": str(home),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
    }


def install(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``trajgrade hook install claude-code ARGS`` in ``home`` (the project too)."""
    return subprocess.run(
        [sys.executable, "-m", "trajgrade", "hook", "install", "claude-code", *args],
        cwd=home,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env(home),
    )


def command(home: Path, event: str = "PreToolUse") -> list[str]:
    """The hook command the install registered for ``event``."""
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    return shlex.split(settings["hooks"][event][0]["hooks"][0]["command"])


def run_hook(
    home: Path, data: dict[str, Any], *, prefix: tuple[str, ...] = ()
) -> tuple[dict[str, Any] | None, str]:
    """Run the installed command (after ``prefix``, e.g. a bwrap wrapper);
    its parsed answer (None when it printed nothing) and stderr."""
    proc = subprocess.run(
        [*prefix, *command(home, str(data["hook_event_name"]))],
        input=json.dumps(data),
        cwd=home,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env(home),
    )
    assert proc.returncode in (0, 2), proc.stderr
    out = proc.stdout.strip()
    return (json.loads(out) if out else None), proc.stderr


def denied(answer: dict[str, Any] | None) -> str | None:
    """The deny reason of a PreToolUse answer, or None."""
    if answer is None:
        return None
    spec = answer.get("hookSpecificOutput") or {}
    if spec.get("permissionDecision") == "deny":
        return str(spec.get("permissionDecisionReason"))
    return None
