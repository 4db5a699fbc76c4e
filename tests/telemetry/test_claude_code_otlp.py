"""End to end: the real Claude Code CLI, offline against the scripted fake
model, exports its OpenTelemetry straight to ``trajgrade grade --otlp``
(http/json and http/protobuf). Its session fails a tool rule and a token
budget live; the verdicts go out again as ``gen_ai.evaluation.result``
records to a recording OTLP sink, and as JUnit XML read back by junitparser.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from junitparser import Error, Failure, JUnitXml
from tests.hooks.test_real_agents import _claude, fake_model_fixture
from tests.telemetry._grade import Grader, OtlpSink

pytestmark = pytest.mark.slow

# The Claude Code install and fake model of the hook tests.
__all__ = ("fake_model_fixture",)

POLICY = """graders:
  - type: tool-calls
    name: no-notes
    config:
      disallowed:
        - {name: "^Write$", args: {file_path: "note\\\\.txt$"}}
  - type: token-budget
    name: tokens
    config: {max: 300}
  - type: tool-call-count
    name: calls
    config: {max: 10}
"""


def _run_claude(
    exe: Path, model_port: int, work: Path, home: Path, otlp_port: int, protocol: str
) -> None:
    (home / ".claude").mkdir(parents=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "TERM": "dumb",
        "LANG": "C.UTF-8",
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{model_port}",
        "ANTHROPIC_API_KEY": "dummy-key-for-fake-server",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "HTTP_PROXY": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1,localhost",
        # The export under test.
        "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
        "OTEL_LOGS_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{otlp_port}",
        "OTEL_LOG_TOOL_DETAILS": "1",
        "OTEL_LOGS_EXPORT_INTERVAL": "500",
    }
    proc = subprocess.run(
        [
            str(exe),
            "-p",
            "do the task",
            "--output-format",
            "stream-json",
            "--verbose",
            "--allowedTools",
            "Bash Write Edit Read",
            "--permission-mode",
            "acceptEdits",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


def _exported(sink: OtlpSink, verdicts: int) -> bool:
    """Every verdict's record and the Write's deny decision arrived."""
    got = sink.records()
    denied = any(
        r["attributes"].get("gen_ai.tool.name") == "Write"
        and r["attributes"].get("gen_ai.evaluation.score.label") == "deny"
        for r in got
    )
    return (
        denied
        and sum("trajgrade.verdict.id" in r["attributes"] for r in got) >= verdicts
    )


@pytest.mark.parametrize("protocol", ["http/json", "http/protobuf"])
def test_claude_code_exports_to_trajgrade(
    fake_model: tuple[int, Path, Path], tmp_path: Path, protocol: str
) -> None:
    exe = _claude()
    model_port, work, _ = fake_model
    policy = tmp_path / "p.yaml"
    policy.write_text(POLICY)
    junit = tmp_path / "junit.xml"
    sink = OtlpSink(fail_first=1)  # the first export is retried after a 503
    grader = Grader(
        policy, "--export-otlp", sink.url, "--export-decisions", "--junit", str(junit)
    )
    try:
        _run_claude(exe, model_port, work, tmp_path / "home", grader.port, protocol)
        live = grader.wait_for(3)
        assert grader.proc.poll() is None
        assert {(v["grader"], v["outcome"]) for v in live if v["final"]} >= {
            ("no-notes", "fail"),
            ("tokens", "fail"),
        }
        assert all(v["early"] for v in live)
        code = grader.stop()
    finally:
        if grader.proc.poll() is None:
            grader.stop()
    assert code == 1
    verdicts = live + grader.rest()
    finals = {v["grader"]: v for v in verdicts if v["final"]}
    assert {g: v["outcome"] for g, v in finals.items()} == {
        "no-notes": "fail",
        "tokens": "fail",
        "calls": "pass",
    }
    session = finals["no-notes"]["trace_id"]

    # --export-otlp: every verdict as a gen_ai.evaluation.result record.
    deadline = time.monotonic() + 10
    while not _exported(sink, len(verdicts)) and time.monotonic() < deadline:
        time.sleep(0.1)
    sink.close()
    assert sink.statuses[0] == 503
    every = sink.records()
    # Guard decisions are exported beside the verdicts (trajgrade.guard.rule).
    records = [r for r in every if "trajgrade.verdict.id" in r["attributes"]]
    decisions = [
        r["attributes"] for r in every if "trajgrade.guard.rule" in r["attributes"]
    ]
    assert len(records) + len(decisions) == len(every)
    assert len(records) == len(verdicts)
    assert ("no-notes", "deny", "Write") in {
        (
            d["gen_ai.evaluation.name"],
            d["gen_ai.evaluation.score.label"],
            d.get("gen_ai.tool.name"),
        )
        for d in decisions
    }
    assert {r["event_name"] for r in records} == {"gen_ai.evaluation.result"}
    assert {r["resource"]["service.name"] for r in records} == {"trajgrade"}
    by_name = {
        r["attributes"]["gen_ai.evaluation.name"]: r["attributes"]
        for r in records
        if r["attributes"]["trajgrade.verdict.final"]
    }
    assert by_name["no-notes"]["gen_ai.evaluation.score.label"] == "fail"
    assert "note" in by_name["no-notes"]["gen_ai.evaluation.explanation"]
    assert by_name["calls"]["gen_ai.evaluation.score.value"] == 1.0
    assert {a["trajgrade.trace_id"] for a in by_name.values()} == {session}

    # --junit: read back by a JUnit parser.
    xml = JUnitXml.fromfile(str(junit))
    [suite] = list(xml)
    assert suite.name == session
    assert (suite.tests, suite.failures, suite.errors) == (3, 2, 0)
    outcomes = {}
    for case in suite:
        kinds = {type(r) for r in case.result}
        outcomes[case.name] = (
            "fail" if Failure in kinds else "error" if Error in kinds else "pass"
        )
    assert outcomes == {"no-notes": "fail", "tokens": "fail", "calls": "pass"}
