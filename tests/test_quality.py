"""Lint and type checks run inside the suite, so CI cannot drift from them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str) -> list[str]:
    exe = shutil.which(name, path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.fail(
            f"{name} is not installed; install the test extra: pip install -e '.[test]'"
        )
    return [exe]


@pytest.mark.slow
def test_ruff_is_clean() -> None:
    """ruff finds nothing in src, tests and benchmarks."""
    proc = subprocess.run(
        [*_tool("ruff"), "check", "src", "tests", "benchmarks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
def test_ruff_format_is_clean() -> None:
    """The code is formatted as ruff format would."""
    proc = subprocess.run(
        [*_tool("ruff"), "format", "--check", "src", "tests", "benchmarks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
def test_mypy_strict_is_clean() -> None:
    """mypy --strict (configured in pyproject) passes on src."""
    proc = subprocess.run(
        [*_tool("mypy")], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
