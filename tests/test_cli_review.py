"""The command line as a careless operator uses it: options repeated, given
without the one they work with, report files that cannot be written. Each
case is a usage error (status 2) naming the option and the fix, never an
option dropped without a word or a traceback after the run.

Real files and ``python -m trajgrade`` processes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

#: Fails trace `t` on its first call (the agent read `.env`).
POLICY = """\
graders:
  - type: tool-calls
    name: no-secrets
    config:
      disallowed:
        - {name: "^view$", path: "(^|/)\\\\.env$"}
"""
#: Passes trace `t` (one call, well under the budget).
LENIENT = "graders:\n  - type: tool-call-count\n    config: {max: 5}\n"
LOG = '{"type":"tool_call","trace_id":"t","name":"view","call_id":"c1","args":{"path":".env"}}\n'


def _files(tmp_path: Path) -> tuple[Path, Path, Path]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    lenient = tmp_path / "lenient.yaml"
    lenient.write_text(LENIENT)
    log = tmp_path / "log.jsonl"
    log.write_text(LOG)
    return policy, lenient, log


@pytest.mark.parametrize("command", ["grade", "check"])
def test_a_second_policy_is_refused_not_dropped(
    tmp_path: Path, run_cli: Any, command: str
) -> None:
    """`-c policy.yaml -c lenient.yaml` used to grade with lenient.yaml alone
    (click keeps the last value): the run passed (status 0) although the
    first policy fails the trace. Now it is a usage error naming both."""
    policy, lenient, log = _files(tmp_path)
    args = [log] if command == "grade" else []
    out = run_cli(command, "-c", policy, "-c", lenient, *args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Invalid value for '-c' / '--config': given 2 times" in out.stderr
    assert "one policy file per run" in out.stderr
    assert out.stdout == ""


def test_one_policy_still_grades(tmp_path: Path, run_cli: Any) -> None:
    policy, _, log = _files(tmp_path)
    out = run_cli("grade", "-q", "-c", policy, log)
    assert out.returncode == 1, out.stderr
    assert '"outcome":"fail"' in out.stdout


def test_a_second_on_fail_command_is_refused_not_dropped(
    tmp_path: Path, run_cli: Any
) -> None:
    """Two --on-fail commands used to run only the last one."""
    policy, _, log = _files(tmp_path)
    out = run_cli("grade", "-c", policy, "--on-fail", "true", "--on-fail", "false", log)
    assert out.returncode == 2, out.stderr
    assert "Invalid value for '--on-fail': given 2 times" in out.stderr


def test_hook_install_refuses_a_second_policy(tmp_path: Path, run_cli: Any) -> None:
    policy, lenient, _ = _files(tmp_path)
    out = run_cli("hook", "install", "gemini", "-c", policy, "-c", lenient, "--dry-run")
    assert out.returncode == 2, out.stderr
    assert "given 2 times" in out.stderr
