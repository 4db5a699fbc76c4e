"""docs/guard.md: the decision-record example is what ``grade --decisions -`` prints."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _block(name: str) -> str:
    text = (ROOT / "docs" / "guard.md").read_text(encoding="utf-8")
    m = re.search(rf"<!-- tested: {name} -->\n```\w+\n(.*?)```", text, re.DOTALL)
    assert m, f"docs/guard.md lost its {name} block"
    return m.group(1)


def test_the_documented_command_prints_the_documented_records(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text(_block("guard-policy"))
    (tmp_path / "session.jsonl").write_text(_block("guard-session"))
    words = shlex.split(_block("guard-command"))
    assert words[0] == "trajgrade"
    proc = subprocess.run(
        [sys.executable, "-m", "trajgrade", *words[1:]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr  # the verdict is a fail
    assert proc.stdout == _block("guard-output")
    assert proc.stdout.count('"type":"decision"') == 2
