"""Helpers for hook tests: recorded payloads, run as real hook processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hooks"
#: fixture folder and transcript file per agent
RECORDED = {
    "claude-code": ("claude-code", "transcript.jsonl"),
    "codex": ("codex", "rollout.jsonl"),
    "gemini": ("gemini-cli", "transcript.jsonl"),
}

POLICY = """\
graders:
  - type: tool-calls
    name: no-hostname
    config:
      disallowed:
        - name: "^(Bash|run_shell_command)$"
          command: "/etc/hostname"
        - name: "^exec_command$"         # Codex's shell tool takes `cmd`
          args: {cmd: "/etc/hostname"}
  - type: token-budget
    config: {max: 100000}
  - type: tool-call-count
    config: {max: 100}
  - type: turn-count
    config: {max: 10}
"""


def payloads(agent: str, transcript: Path | None = None) -> list[dict[str, Any]]:
    """The recorded payloads of ``agent``'s base run, in firing order;
    ``transcript_path`` pointed at ``transcript`` when given."""
    folder = FIXTURES / RECORDED[agent][0] / "hooks"
    out = []
    for path in sorted(folder.glob("*.json")):
        p = json.loads(path.read_text())
        if transcript is not None:
            p["transcript_path"] = str(transcript)
        out.append(p)
    return out


def hook_cmd(agent: str, *args: str | os.PathLike[str]) -> list[str]:
    """``python -m trajgrade hook AGENT ARGS``."""
    return [
        sys.executable,
        "-m",
        "trajgrade",
        "hook",
        agent,
        *[os.fspath(a) for a in args],
    ]


def run_hook(
    agent: str, payload: dict[str, Any], *args: str | os.PathLike[str]
) -> subprocess.CompletedProcess[str]:
    """One hook invocation as a real process."""
    return subprocess.run(
        hook_cmd(agent, *args),
        input=json.dumps(payload),
        capture_output=True,
        encoding="utf-8",
        timeout=60,
        check=False,
    )


def read_verdicts(path: Path) -> list[dict[str, Any]]:
    """Every verdict line in ``path``."""
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def finals(verdicts: list[dict[str, Any]]) -> dict[str, tuple[str, float]]:
    """grader -> (outcome, score) of its final verdict."""
    return {v["grader"]: (v["outcome"], v["score"]) for v in verdicts if v["final"]}
