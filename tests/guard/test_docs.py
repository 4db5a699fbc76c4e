"""Every config block and command in docs/guard-matching.md runs as shown
(blocks after `<!-- illustrative -->` excepted)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from tests._support import suite

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "guard-matching.md"
_BLOCK = re.compile(r"(<!-- illustrative -->\n)?```(\w+)\n(.*?)```", re.DOTALL)


def _blocks(lang: str) -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    return [b for ill, k, b in _BLOCK.findall(text) if k == lang and not ill]


def test_the_page_has_blocks() -> None:
    assert _blocks("yaml") and _blocks("sh")


@pytest.mark.parametrize("block", _blocks("yaml"))
def test_config_blocks_compile(block: str) -> None:
    assert suite(block).graders


@pytest.mark.parametrize("block", _blocks("sh"))
def test_commands_run(block: str) -> None:
    for line in block.strip().splitlines():
        words = shlex.split(line)
        assert words[0] == "trajgrade", line
        proc = subprocess.run(
            [sys.executable, "-m", "trajgrade", *words[1:]],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        if words[1] == "check":
            assert proc.returncode == 0, proc.stderr
            assert "warning" not in proc.stderr  # the example is clean
        else:  # the demo grade: the recorded session breaks no rule
            assert proc.returncode == 0, proc.stderr
            assert (
                '"grader":"guard","kind":"tool-calls","outcome":"pass"' in proc.stdout
            )
            assert '"outcome":"fail"' not in proc.stdout
