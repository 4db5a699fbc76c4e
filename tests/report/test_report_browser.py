"""The ``--report`` page of a real recorded run, opened in a real browser
(Debian's headless Chromium, driven by Playwright; never a downloaded one).

The run grades recorded Claude Code sessions (tests/fixtures/claude-code,
provenance in its SOURCES.md) with the shipped strict guard profile, which
fails the session that fetches a GitHub issue page (``WebFetch``: network
egress the strict profile denies). Every other call of the three sessions
is judged with its own recorded ``cwd`` and passes: until the transcript
reader kept it, ``mix phx.server`` and ``rm hello.js`` (relative words with
no project root) were taken for reads of ``~/.ssh``, and the report showed
those false failures. One session is given twice under two names, which the
page must warn about.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "claude-code"
POLICY = ROOT / "src" / "trajgrade" / "examples" / "guard.yaml"
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM = "/usr/bin/chromium"
SESSIONS = (
    "spotter_v2.1.38_tool_heavy.jsonl",
    "codemie_v2.0.64_small.jsonl",
    "agentcmd_v2.0.26_plan_mode.jsonl",
)

pytestmark = pytest.mark.slow


def _graded(tmp_path: Path) -> tuple[Path, list[dict[str, object]], str]:
    again = tmp_path / "same-session-again.jsonl"
    shutil.copyfile(FIXTURES / SESSIONS[1], again)
    report = tmp_path / "run.html"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "trajgrade",
            "grade",
            "-c",
            str(POLICY),
            *(str(FIXTURES / s) for s in SESSIONS),
            str(again),
            "--report",
            str(report),
        ],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert done.returncode == 1, done.stderr  # the strict profile fails one
    verdicts = [json.loads(line) for line in done.stdout.splitlines()]
    return report, verdicts, done.stderr


def test_the_report_of_a_real_run_in_chromium(tmp_path: Path) -> None:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} is absent: apt-get install chromium (.ci/run does)")
    from playwright.sync_api import sync_playwright

    report, verdicts, stderr = _graded(tmp_path)
    assert "session_in_two_inputs" in stderr
    final = [v for v in verdicts if v.get("final")]
    traces = {str(v["trace_id"]) for v in final}
    failed = {str(v["trace_id"]) for v in final if v["outcome"] != "pass"}
    # The WebFetch session fails, for its egress and nothing else.
    assert failed == {"d6e0bada-1959-4eec-a9d2-0bfade768d8f"}, final
    reasons = {str(v["evidence"]) for v in final if v["outcome"] != "pass"}
    assert all("WebFetch would reach github.com" in r for r in reasons), reasons

    fetched: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            # Anything but the file itself would be a fetch: none allowed.
            page.on("request", lambda r: fetched.append(r.url))
            page.goto(report.as_uri())
            assert page.locator("#n-traces").inner_text() == str(len(traces))
            assert page.locator("#n-failed").inner_text() == str(len(failed))
            assert page.locator("tr.trace").count() == len(traces)
            # Failures come first.
            first = page.locator("tr.trace").first
            assert first.get_attribute("data-failed") == "true"
            assert "same-session-again.jsonl" in page.locator(".warn").inner_text()

            page.locator("#only-failed").check()
            assert page.locator("tr.trace").count() == len(failed)
            row = page.locator("tr.trace").first
            trace = row.get_attribute("data-trace")
            assert trace in failed
            row.click()
            deciding = page.locator("tr.call.deciding")
            deciding.wait_for()
            # The deciding event is the trace's first failing verdict (an
            # early one, before the final verdict sums up the trace).
            verdict = next(
                v for v in verdicts if v["trace_id"] == trace and v["outcome"] != "pass"
            )
            assert (
                str(verdict["evidence"]) in page.locator(".detail p").first.inner_text()
            )
            marked = deciding.locator("mark").inner_text()
            assert marked and marked in str(verdict["evidence"])
            assert page.locator("svg.timeline").count() == 1
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
        finally:
            browser.close()
    assert fetched == [report.as_uri()]
