"""``trajgrade init`` writes a shipped example policy (so an installed
trajgrade has one without a clone), and click's shell completion works
through the console script: real processes, a real bash."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trajgrade.config.compile import load_suite

EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "trajgrade" / "examples"
SCRIPT = Path(sys.executable).parent / "trajgrade"


def test_init_writes_the_strict_guard_and_says_how_to_attach_it(
    tmp_path: Path, run_cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    out = run_cli("init", "--agent", "codex")
    assert out.returncode == 0, out.stderr
    written = tmp_path / "policy.yaml"
    assert written.read_text() == (EXAMPLES / "guard.yaml").read_text()
    assert "next: trajgrade hook install codex -c policy.yaml" in out.stdout
    assert "written, the shipped guard example" in out.stdout
    assert [g.name for g in load_suite(written).graders][-2:] == [
        "guard",
        "tool-call-count",
    ]


def test_init_never_overwrites_without_force(tmp_path: Path, run_cli: Any) -> None:
    target = tmp_path / "mine.yaml"
    target.write_text("graders: []\n")
    out = run_cli("init", "--example", "grade", target)
    assert out.returncode == 2
    assert f"{target} exists; give another PATH, or --force" in out.stderr
    assert target.read_text() == "graders: []\n"
    forced = run_cli("init", "--example", "grade", "--force", target)
    assert forced.returncode == 0, forced.stderr
    assert target.read_text() == (EXAMPLES / "policy.yaml").read_text()


def _complete(words: str) -> list[str]:
    """What bash completes after ``words``, with the script click prints."""
    script = (
        'eval "$(_TRAJGRADE_COMPLETE=bash_source trajgrade)"\n'
        f"COMP_WORDS=({words}); COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))\n"
        '_trajgrade_completion trajgrade; printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = {**os.environ, "PATH": f"{SCRIPT.parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=env, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


@pytest.mark.skipif(not SCRIPT.exists(), reason=f"no console script {SCRIPT}")
@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_bash_completes_commands_and_options() -> None:
    assert _complete("trajgrade in") == ["init"]
    assert _complete("trajgrade grade --kafka-b") == ["--kafka-bootstrap"]
    assert "install" in _complete("trajgrade hook ins")
