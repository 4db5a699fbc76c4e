"""The real upstream packages, installed once into a cache outside the repository.

``$TRAJGRADE_DIFF_CACHE`` (default ``~/.cache/trajgrade-diff``) holds
``agentv-<version>/`` (an npm project with ``@agentv/core``) and
``letta-evals-<version>/`` (a virtualenv with ``letta-evals``). An install
that cannot be made (no node/npm, no network, a failing pip) skips the test
with the reason and the installer's last output: loudly, never a pass.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from tests._first_use import once

AGENTV = "@agentv/core@4.42.4"
LETTA = "letta-evals==0.26.0"
HERE = Path(__file__).resolve().parent


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "trajgrade-diff"
    return Path(os.environ.get("TRAJGRADE_DIFF_CACHE", default))


def _skip(what: str, detail: str) -> None:
    reason = f"UPSTREAM NOT AVAILABLE, differential test NOT RUN: {what}: {detail.strip()[-800:]}"
    print(reason, file=sys.stderr)
    pytest.skip(reason)


def _run(cmd: list[str], cwd: Path, what: str, timeout: float = 600) -> None:
    try:
        done = subprocess.run(
            cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        _skip(what, f"{' '.join(cmd)}: {exc}")
        return
    if done.returncode != 0:
        _skip(
            what,
            f"{' '.join(cmd)} exited {done.returncode}: {done.stderr or done.stdout}",
        )


def agentv_home() -> Path:
    """An npm project with the pinned @agentv/core (installed on first use,
    before the first test: tests/_first_use.py)."""
    return once(f"{AGENTV} in {cache_dir()}", _agentv_home)


def _agentv_home() -> Path:
    home = cache_dir() / ("agentv-" + AGENTV.rsplit("@", 1)[1])
    marker = home / "node_modules" / "@agentv" / "core" / "package.json"
    if shutil.which("node") is None or shutil.which("npm") is None:
        _skip(AGENTV, "node and npm are needed (install Node.js >= 20)")
    if not marker.exists():
        home.mkdir(parents=True, exist_ok=True)
        if not (home / "package.json").exists():
            (home / "package.json").write_text(
                '{"name": "trajgrade-diff", "private": true}\n'
            )
        _run(
            ["npm", "install", AGENTV, "--ignore-scripts", "--no-audit", "--no-fund"],
            home,
            f"npm install {AGENTV}",
        )
    version = json.loads(marker.read_text())["version"]
    if version != AGENTV.rsplit("@", 1)[1]:
        _skip(AGENTV, f"{home} holds @agentv/core {version}; remove it to reinstall")
    return home


def letta_python() -> Path:
    """The python of a virtualenv with the pinned letta-evals (made on first
    use, before the first test: tests/_first_use.py)."""
    return once(f"{LETTA} in {cache_dir()}", _letta_python)


def _letta_python() -> Path:
    home = cache_dir() / ("letta-evals-" + LETTA.split("==")[1])
    python = home / "bin" / "python"
    marker = home / ".installed"
    if not marker.exists():
        if not python.exists():
            _run(
                [sys.executable, "-m", "venv", str(home)], cache_dir(), "python -m venv"
            )
        _run(
            [str(python), "-m", "pip", "install", "--quiet", LETTA],
            home,
            f"pip install {LETTA}",
        )
        marker.write_text(LETTA + "\n")
    return python


def run_batch(cmd: list[str], cases: list[dict[str, Any]], cwd: Path) -> list[Any]:
    """Send a batch of cases to one upstream process; its answers, in order."""
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp, "cases.jsonl"), Path(tmp, "answers.jsonl")
        src.write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
        done = subprocess.run(
            [*cmd, str(src), str(dst)],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, f"{cmd} failed: {done.stderr[-2000:]}"
        answers = [json.loads(x) for x in dst.read_text(encoding="utf-8").splitlines()]
    assert len(answers) == len(cases), (len(answers), len(cases))
    return answers


def agentv_runner() -> tuple[list[str], Path]:
    """The node command grading agentv batches (the driver runs from the cache,
    where node resolves @agentv/core and yaml)."""
    home = agentv_home()
    shutil.copy(HERE / "drive_agentv.mjs", home / "drive_agentv.mjs")
    return ["node", "drive_agentv.mjs"], home


def letta_runner() -> tuple[list[str], Path]:
    python = letta_python()
    return [str(python), str(HERE / "drive_letta.py")], HERE
