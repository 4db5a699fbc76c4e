"""docs/telemetry.md: every block not marked illustrative is run here."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "telemetry.md"
_BLOCK = re.compile(r"(<!-- illustrative -->\n)?```(\w+)\n(.*?)```", re.DOTALL)


def test_runnable_blocks_run() -> None:
    blocks = [
        (lang, body) for mark, lang, body in _BLOCK.findall(DOC.read_text()) if not mark
    ]
    assert blocks, "the page has no runnable example"
    bindir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}
    for lang, body in blocks:
        assert lang == "sh", (
            f"a {lang} block must be marked illustrative or tested elsewhere"
        )
        proc = subprocess.run(
            ["sh", "-e", "-c", body + " --output jsonl"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 1, proc.stderr  # the example session fails
        finals = {
            v["grader"]: v["outcome"]
            for v in map(json.loads, proc.stdout.splitlines())
            if v["final"]
        }
        assert finals == {"no-notes": "fail", "tokens": "fail"}
