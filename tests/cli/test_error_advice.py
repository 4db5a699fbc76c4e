"""Each piece of advice an error gives is the fix that works here (issue 36):
the regex advice names the inline ``(?i)`` the docs recommend, ``on_fail``
one level too deep is to be moved up (not removed), and an entry whose own
``kind:`` lacks the view is told to split the filter off (not to add the
``kind:`` it already has). ``trajgrade check`` processes on real files, and
the compiled suite on a real call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests._support import call, finals, suite


def _check(tmp_path: Path, run_cli: Any, policy: str, *more: str) -> Any:
    path = tmp_path / "policy.yaml"
    path.write_text(policy)
    return run_cli("check", "-c", path, *more)


def test_a_regex_error_advises_the_inline_flag_not_no_flags(
    tmp_path: Path, run_cli: Any
) -> None:
    policy = (
        "graders:\n  - type: tool-calls\n    config:\n      disallowed:\n"
        '        - {kind: shell, program: "(?s)^curl$"}\n'
    )
    out = _check(tmp_path, run_cli, policy)
    assert out.returncode == 2, out.stderr
    assert "policy.yaml:5:" in out.stderr
    assert "write (?i) in the pattern" in out.stderr
    assert "no flags" not in out.stderr
    fixed = _check(tmp_path, run_cli, policy.replace("(?s)", "(?i)"))
    assert fixed.returncode == 0, fixed.stderr


def test_on_fail_under_config_is_to_be_moved_up(tmp_path: Path, run_cli: Any) -> None:
    policy = (
        "graders:\n  - type: tool-calls\n    name: guard\n    config:\n"
        "      on_fail: deny\n      disallowed: [{name: '^Bash$'}]\n"
    )
    out = _check(tmp_path, run_cli, policy)
    assert out.returncode == 2, out.stderr
    assert "policy.yaml:5: graders[0].config.on_fail:" in out.stderr
    assert "move it up one level, out of `config:`" in out.stderr
    assert "remove it" not in out.stderr
    moved = policy.replace("      on_fail: deny\n", "").replace(
        "    config:", "    on_fail: deny\n    config:"
    )
    assert _check(tmp_path, run_cli, moved).returncode == 0


SHELL_WITH_PATH = (
    "graders:\n  - type: tool-calls\n    name: guard\n    config:\n"
    "      disallowed:\n        - {kind: shell, path: '(^|/)\\.env$'}\n"
)


def test_an_entry_whose_kind_lacks_the_view_is_not_told_to_add_kind(
    tmp_path: Path, run_cli: Any
) -> None:
    out = _check(tmp_path, run_cli, SHELL_WITH_PATH, "--agent", "claude-code")
    assert out.returncode == 0, out.stderr
    warning = next(line for line in out.stderr.splitlines() if "has no path" in line)
    assert "narrow the entry with kind:" not in warning
    assert "its kind: shell selects tools without path" in warning
    assert "(edit, list, read, search, write)" in warning


def test_the_runtime_error_verdict_gives_the_same_advice() -> None:
    verdicts = finals(suite(SHELL_WITH_PATH), [call("Bash", "c1", command="ls")])
    (verdict,) = verdicts.values()
    assert verdict.outcome == "error"
    assert "its kind: shell selects tools without path" in verdict.evidence
    assert "narrow the entry with kind:" not in verdict.evidence


def test_an_entry_without_kind_is_still_told_to_narrow_it() -> None:
    policy = SHELL_WITH_PATH.replace("kind: shell", "name: '^Bash$'")
    verdicts = finals(suite(policy), [call("Bash", "c1", command="ls")])
    (verdict,) = verdicts.values()
    assert "narrow the entry with kind: (" in verdict.evidence
