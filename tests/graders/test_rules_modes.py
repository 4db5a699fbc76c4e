"""The four guard rules give the same verdicts on a real session read as a
file, from stdin (both by the real CLI process) and through StreamGrader fed
in small chunks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from tests.graders._guard import FIXTURES

from trajgrade import StreamGrader

POLICY = """\
graders:
  - type: cost-budget
    config: {max_usd: 0.5, warn_at: 0.5}
  - type: rate-limit
    config: {match: ".*", max: 4, window: 60s}
  - type: loop
    config: {repeats: 2, within: 20, ping_pong: 4}
  - type: flow
    config: {after: "^WebSearch$", bind: result, forbid: "^WebFetch$", if_bound: url}
  - type: flow
    name: test-after-edit
    config: {after: "^(Edit|Write)$", require: "^Bash$", within: 3}
"""

SESSIONS = [
    "claude-code/spotter_v2.1.38_tool_heavy.jsonl",
    "codex/localpush_v0.104_redacted_118_calls.jsonl",
]


def _key(v: dict[str, object]) -> tuple[object, ...]:
    return (
        v["trace_id"],
        v["grader"],
        v["outcome"],
        v["score"],
        v["final"],
        v.get("evidence"),
    )


def _cli(
    policy: Path, args: list[str], stdin: bytes | None = None
) -> list[tuple[object, ...]]:
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
            str(policy),
            *args,
        ],
        input=stdin,
        capture_output=True,
        check=False,
    )
    assert out.returncode in (0, 1), out.stderr.decode()
    return sorted(
        _key(msgspec.json.decode(line))
        for line in out.stdout.splitlines()
        if line.strip()
    )


@pytest.mark.parametrize("name", SESSIONS)
def test_file_stdin_and_stream_grader_agree(name: str, tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    path = FIXTURES / name
    from_file = _cli(policy, [str(path)])
    from_stdin = _cli(policy, ["-"], stdin=path.read_bytes())
    grader = StreamGrader.from_text(POLICY, source=path.name)
    data = path.read_bytes()
    verdicts = [
        v
        for i in range(0, len(data), 4096)
        for v in grader.feed_bytes(data[i : i + 4096])
    ]
    verdicts += grader.finish()
    streamed = sorted(_key(msgspec.to_builtins(v)) for v in verdicts)
    assert from_file == from_stdin == streamed
    # The policy bites on these sessions: some rule fails, early.
    assert any(k[2] == "fail" and not k[4] for k in streamed)
