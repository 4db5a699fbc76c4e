"""What the model is told when a hook refuses a call (issue 36), through a
real `trajgrade hook claude-code` process.

Before: ``trajgrade denied this call: grader 'no-secrets' (tool-calls)
failed: disallowed[0] {name: '^(Read|view)$', path: '(^|/)\\.env$'} matched
call toolu_01 to 'Read'`` -- the rule's regexes, not the file.
After: what matched (the path), or the policy's ``message:`` first."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from tests.hooks._replay import run_hook

if TYPE_CHECKING:
    from pathlib import Path

RULE = "        - {name: '^(Read|view)$', path: '(^|/)\\.env$'%s}\n"
POLICY = "graders:\n  - type: tool-calls\n    name: no-secrets\n    config:\n      disallowed:\n"


def _reason(tmp_path: Path, message: str = "") -> str:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY + RULE % (f", message: '{message}'" if message else ""))
    payload = {
        "session_id": "s1",
        "transcript_path": str(tmp_path / "t.jsonl"),
        "cwd": str(tmp_path),
        "hook_event_name": "PreToolUse",
        "tool_name": "Read",
        "tool_input": {"file_path": f"{tmp_path}/.env"},
        "tool_use_id": "toolu_01",
    }
    proc = run_hook(
        "claude-code", payload, "-c", policy, "--state-dir", tmp_path / "state"
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny"
    reason: str = out["permissionDecisionReason"]
    return reason


def test_a_denial_names_the_file_not_the_regex(tmp_path: Path) -> None:
    reason = _reason(tmp_path)
    assert reason == (
        f"trajgrade denied this call: disallowed[0] matched 'Read' path "
        f"'{tmp_path}/.env' in call toolu_01 (grader 'no-secrets')"
    )
    assert "^(Read|view)$" not in reason


def test_a_denial_tells_the_rules_message_first(tmp_path: Path) -> None:
    reason = _reason(tmp_path, "Do not read .env files; ask the user for the value.")
    assert reason == (
        "trajgrade denied this call: Do not read .env files; ask the user for the "
        f"value. [disallowed[0] matched 'Read' path '{tmp_path}/.env' in call "
        "toolu_01] (grader 'no-secrets')"
    )
