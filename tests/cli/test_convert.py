"""`trajgrade convert` and `trajgrade stats` on real recorded logs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).parents[1] / "fixtures"
CLAUDE = FIXTURES / "claude-code" / "agentcmd_v2.0.14_trailing_unanswered_calls.jsonl"


def _run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "trajgrade", *args],
        input=stdin,
        capture_output=True,
        timeout=60,
        check=False,
    )


def test_convert_writes_canonical_events_that_grade_the_same(tmp_path: Path) -> None:
    """A Claude Code log converted to canonical JSONL grades exactly as the original."""
    proc = _run("convert", str(CLAUDE))
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert sum(e["type"] == "tool_call" for e in events) == 23  # SOURCES.md
    assert all(e["trace_id"] for e in events)
    converted = tmp_path / "canonical.jsonl"
    converted.write_bytes(proc.stdout)
    cfg = tmp_path / "policy.yaml"
    cfg.write_text(
        "graders:\n  - {type: tool-call-count, config: {max: 20}}\n  - {type: token-budget, config: {max: 100000}}\n"
    )

    def verdicts(path: Path) -> set[tuple[str, str, float]]:
        out = _run("grade", "-q", "-c", str(cfg), str(path)).stdout
        return {
            (v["grader"], v["outcome"], v["score"])
            for v in map(json.loads, out.splitlines())
            if v["final"]
        }

    assert verdicts(converted) == verdicts(CLAUDE)


def test_stats_counts_what_the_graders_see() -> None:
    """Per trace: calls by name, results, unanswered calls, turns and tokens."""
    proc = _run("stats", "--json", str(CLAUDE))
    assert proc.returncode == 0, proc.stderr
    (row,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert sum(row["tool_calls"].values()) == 23
    assert (row["results"], row["unanswered"]) == (20, 3)
    assert row["tool_calls"]["mcp__happy__change_title"] == 2
    assert row["input_tokens"] > 0 and row["turns"] >= 1


def test_stats_reads_stdin_and_reports_bad_lines() -> None:
    """Bad lines are reported on stderr with their line; the counts of good ones stand."""
    log = b'{"trace_id":"t","type":"tool_call","name":"bash","call_id":"1"}\n{oops\n'
    proc = _run("stats", "--json", stdin=log)
    assert proc.returncode == 1
    (row,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert (row["trace_id"], row["tool_calls"], row["unanswered"]) == (
        "t",
        {"bash": 1},
        1,
    )
    assert b'"line":2' in proc.stderr


def test_an_unknown_format_is_a_usage_error() -> None:
    """`convert --format nope` and `stats --format nope` crashed with a
    traceback and status 1; now they say what `grade` says, status 2."""
    for command in ("convert", "stats"):
        proc = _run(command, "--format", "nope", str(CLAUDE))
        err = proc.stderr.decode()
        assert proc.returncode == 2, err
        assert "Invalid value for --format: unknown format 'nope'; known: auto," in err
        assert "Traceback" not in err
