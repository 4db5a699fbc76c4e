"""Command-line misuse and config mistakes: a one-line error naming the
option or the place in the file and the fix, status 2, never a traceback.

Real files and ``python -m trajgrade`` processes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

POLICY = "graders:\n  - type: turn-count\n    config: {max: 5}\n"


@pytest.mark.parametrize(
    ("command", "option"),
    [
        (["run", "--grace", "nan", "--", "true"], "--grace"),
        (["run", "--grace", "inf", "--", "true"], "--grace"),
        (["run", "--tick", "nan", "--", "true"], "--tick"),
        (["grade", "--idle-timeout", "nan", "-"], "--idle-timeout"),
        (["grade", "--threshold", "nan", "-"], "--threshold"),
        (
            ["serve", "--checkpoint-interval", "nan", "--port", "0"],
            "--checkpoint-interval",
        ),
    ],
)
def test_a_number_that_is_not_finite_is_refused(
    tmp_path: Path, run_cli: Any, command: list[str], option: str
) -> None:
    """nan passes every range check (its comparisons are all false): it used
    to crash the clock (`--tick nan`: a traceback, status 1) or disable a
    limit. Now it is a usage error naming the option."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    out = run_cli(command[0], "-c", policy, *command[1:], input="")
    assert out.returncode == 2, out.stderr
    assert f"Invalid value for '{option}'" in out.stderr
    assert "is not a finite number" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        (
            "policy.yaml",
            "graders: 5\n",
            "policy.yaml:1: graders: `graders` must be a list of graders",
        ),
        (
            "policy.yaml",
            "graders:\n",
            "`graders` must be a list of graders [{type, name?, config}] (or letta-evals' mapping), got nothing",
        ),
        (
            "policy.yaml",
            "graders:\n  - type: tool-calls\n    confg: {required: [bash]}\n",
            "policy.yaml:3: graders[0].confg: unknown key `confg`; did you mean `config`?",
        ),
        (
            "policy.json",
            '{"graders": [\n  {"type": "turn-count",\n   "config": {"max": 3},}\n]}',
            "policy.json:3: not valid JSON",
        ),
    ],
    ids=["graders-not-a-list", "graders-empty", "config-misspelt", "json-line"],
)
def test_config_mistakes_are_located_and_explained(
    tmp_path: Path, run_cli: Any, name: str, text: str, expected: str
) -> None:
    """The message names the file, the line and the key, and says what to
    write; one error, not a second one caused by the first."""
    path = tmp_path / name
    path.write_text(text)
    out = run_cli("check", "-c", path)
    assert out.returncode == 2, out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, out.stderr
    assert expected in errors[0]
    assert "Traceback" not in out.stderr


def _not_a_config(tmp_path: Path, kind: str) -> tuple[Path, str]:
    """A -c argument that is no YAML text, and what its error must say."""
    if kind == "binary":  # a real program, as `-c /bin/ls` gives
        path = Path(sys.executable).resolve()
        return path, f"{path}: not a text file (a NUL byte at byte "
    if kind == "control-character":
        path = tmp_path / "policy.yaml"
        path.write_bytes(b"graders:\n  - type: turn-count\x7f\n")
        return path, f"{path}:2: not valid YAML: character U+007F (column 21)"
    return tmp_path, f"'{tmp_path}' is a directory"


@pytest.mark.parametrize("kind", ["binary", "control-character", "directory"])
@pytest.mark.parametrize("command", ["check", "grade"])
def test_a_config_that_is_not_yaml_text_names_the_file(
    tmp_path: Path, run_cli: Any, kind: str, command: str
) -> None:
    """`check -c /bin/ls` used to blame PyYAML's buffer (`in "<unicode
    string>", position 0`); the error names the file, the line and column
    when it has them, with status 2 like any config error."""
    path, expected = _not_a_config(tmp_path, kind)
    args = ["-"] if command == "grade" else []
    out = run_cli(command, "-c", path, *args, input="")
    assert out.returncode == 2, out.stderr
    assert expected in out.stderr, out.stderr
    assert "<unicode string>" not in out.stderr
    assert "Traceback" not in out.stderr


def test_the_hook_names_a_binary_config(run_cli: Any) -> None:
    """The hook reports a config error to the agent (fail-open); its message
    names the file too."""
    binary = Path(sys.executable).resolve()
    payload = json.dumps(
        {"session_id": "s", "hook_event_name": "SessionStart", "cwd": "/"}
    )
    out = run_cli("hook", "claude-code", "-c", binary, input=payload)
    assert out.returncode == 0, out.stderr
    assert f"{binary}: not a text file" in out.stdout, out.stdout
    assert "<unicode string>" not in out.stdout + out.stderr


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (["run", "--", "true"], "--agent-output"),
        (["grade", "-"], "redirect it"),
    ],
)
def test_stdout_closed_is_a_usage_error(
    tmp_path: Path, command: list[str], expected: str
) -> None:
    """`trajgrade run … >&-` and `grade … >&-`: a usage error saying what to
    do, not an AttributeError traceback from the missing sys.stdout."""
    import subprocess
    import sys

    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    argv = [sys.executable, "-m", "trajgrade", command[0], "-c", str(policy)]
    argv += command[1:]
    out = subprocess.run(
        ["sh", "-c", 'exec "$@" >&-', "sh", *argv],
        input="",
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert out.returncode == 2, out.stderr
    assert "stdout is closed" in out.stderr and expected in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    ("given", "needed"),
    [
        (["--glob", "*.jsonl"], "--watch"),
        (["--dataset-key", "id"], "--dataset"),
        (["--checkpoint-interval", "3"], "--state"),
        (["--group", "graders"], "--kafka-bootstrap"),
        (["--kafka-encoding", "otlp_proto"], "--kafka-bootstrap"),
    ],
)
def test_an_option_without_the_one_it_works_with_is_refused(
    tmp_path: Path, run_cli: Any, given: list[str], needed: str
) -> None:
    """These were ignored without a word (a --glob with no --watch graded the
    files given, whatever the pattern): now a usage error naming both."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    log = tmp_path / "log.jsonl"
    log.write_text("")
    out = run_cli("grade", "-c", policy, *given, log)
    assert out.returncode == 2, out.stderr
    assert f"{given[0]} works with {needed} only" in out.stderr
