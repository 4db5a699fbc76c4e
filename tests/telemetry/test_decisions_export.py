"""``grade --export-otlp --export-decisions`` sends the guard decisions
too, each as a ``gen_ai.evaluation.result`` record with its action as the
label; without ``--export-decisions`` the export holds verdicts only (a real
``trajgrade grade`` process, a recording OTLP endpoint)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING

from tests.telemetry._grade import OtlpSink

if TYPE_CHECKING:
    from pathlib import Path

POLICY = """graders:
  - type: tool-calls
    name: no-curl
    config:
      disallowed: [{kind: shell, program: "^curl$"}]
"""


def _call(cid: str, command: str) -> str:
    return json.dumps(
        {
            "type": "tool_call",
            "trace_id": "s1",
            "call_id": cid,
            "name": "Bash",
            "args": {"command": command},
        }
    )


def _export(tmp_path: Path, *flags: str) -> list[dict[str, object]]:
    """The attributes of every record one graded session exported."""
    (tmp_path / "p.yaml").write_text(POLICY)
    session = tmp_path / "s.jsonl"
    session.write_text(
        "\n".join(
            [
                _call("c1", "curl http://evil.test"),
                _call("c2", "ls"),
                _call("c3", "sudo curl http://evil.test"),
                '{"type":"trace_end","trace_id":"s1"}',
            ]
        )
        + "\n"
    )
    sink = OtlpSink()
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "trajgrade",
                "grade",
                "-q",
                "--output",
                "jsonl",
                "-c",
                str(tmp_path / "p.yaml"),
                "--export-otlp",
                sink.url,
                *flags,
                str(session),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        sink.close()  # the exporter delivered before the process exited
    assert proc.returncode == 1, proc.stderr
    return [r["attributes"] for r in sink.records()]


def test_grade_exports_every_decision_when_asked(tmp_path: Path) -> None:
    """The verdict is decided once; each curl (the retry too) is a decision
    record, and the same decisions go to --decisions."""
    records = _export(
        tmp_path, "--export-decisions", "--decisions", str(tmp_path / "d.jsonl")
    )
    verdicts = [a for a in records if "trajgrade.verdict.id" in a]
    decisions = [a for a in records if "trajgrade.guard.rule" in a]
    assert len(verdicts) + len(decisions) == len(records)
    assert [v["gen_ai.evaluation.score.label"] for v in verdicts] == ["fail"]
    assert [
        (
            d["gen_ai.tool.call.id"],
            d["gen_ai.evaluation.score.label"],
            d["trajgrade.guard.rule"],
            d["trajgrade.trace_id"],
        )
        for d in decisions
    ] == [("c1", "deny", "disallowed[0]", "s1"), ("c3", "deny", "disallowed[0]", "s1")]
    written = [json.loads(x) for x in (tmp_path / "d.jsonl").read_text().splitlines()]
    assert [d["call_id"] for d in written] == ["c1", "c3"]


def test_grade_exports_verdicts_only_unless_asked(tmp_path: Path) -> None:
    """A grading run's export is its verdicts (issue 36: 197 decisions beside
    33 verdicts); --decisions PATH alone writes them to its file only."""
    records = _export(tmp_path, "--decisions", str(tmp_path / "d.jsonl"))
    assert [a["gen_ai.evaluation.score.label"] for a in records] == ["fail"]
    assert all("trajgrade.verdict.id" in a for a in records)
    written = [json.loads(x) for x in (tmp_path / "d.jsonl").read_text().splitlines()]
    assert [d["call_id"] for d in written] == ["c1", "c3"]
    assert not any("stopped" in d["reason"] for d in written)
