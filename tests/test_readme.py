"""The README's promises that CI depends on."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def test_ci_runs_the_readme_test_command() -> None:
    """.ci/run executes exactly the test command the README shows."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    command = 'python -m pip install -e ".[test]" && python -m pytest'
    assert command in ci
    assert command in _readme()


def test_readme_demo_files_exist() -> None:
    """The bundled policy and log named by the README's first command exist."""
    m = re.search(r"trajgrade grade -c (\S+) (\S+)", _readme())
    assert m, "README lost its demo command"
    assert (ROOT / m.group(1)).exists()
    assert (ROOT / m.group(2)).exists()


def test_verdict_example_is_the_demo_output() -> None:
    """The verdict shown under "Verdicts" is the demo's real first line."""
    import subprocess
    import sys

    example = re.search(r'^\{"id":"[0-9a-f]{16}".*$', _readme(), re.MULTILINE)
    assert example, "README lost its verdict example"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "trajgrade",
            "grade",
            "-q",
            "--output",
            "jsonl",
            "-c",
            "src/trajgrade/examples/policy.yaml",
        ],
        # Piped, as the README shows it (the verdict's source names stdin).
        input=(ROOT / "src/trajgrade/examples/session.jsonl").read_text(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    assert out.splitlines()[0] == example.group(0)
