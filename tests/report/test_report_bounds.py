"""The run report stays bounded on a large corpus and is rewritten
atomically. The events are a real recorded Claude Code session
(tests/fixtures/claude-code, provenance in its SOURCES.md), decoded by the
real reader and graded by the real engine, replayed under many trace ids."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from trajgrade import Engine
from trajgrade.config.compile import load_suite
from trajgrade.events import Event
from trajgrade.pipeline.decoder import SourceDecoder
from trajgrade.report import ReportSink, RunReport
from trajgrade.report.collector import RING

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "claude-code"
SESSION = FIXTURES / "codemie_v2.0.64_small.jsonl"
#: A session the strict profile fails for a real reason: its WebFetch of a
#: GitHub issue is network egress. (codemie's session passes since its
#: calls keep their recorded cwd: `rm hello.js` was taken for a ~/.ssh path.)
FAILING = FIXTURES / "spotter_v2.1.38_tool_heavy.jsonl"
POLICY = ROOT / "src" / "trajgrade" / "examples" / "guard.yaml"


def _events(session: Path = SESSION) -> list[Event]:
    decoder = SourceDecoder(str(session), default_trace="session")
    return decoder.feed(session.read_bytes()).events + decoder.close().events


def test_a_large_corpus_keeps_a_bounded_report() -> None:
    events = _events(FAILING)
    engine = Engine(load_suite(POLICY))
    report = RunReport(max_passing=20, max_failing=30)
    copies = 60_000 // len(events)  # ~60,000 events
    most_held = 0
    for n in range(copies):
        trace = f"copy-{n}"
        batch = [msgspec.structs.replace(e, trace_id=trace) for e in events]
        report.observe(f"file-{n % 7}.jsonl", batch)
        for event in batch:
            report.send(engine.feed(event))
        report.send(engine.end_trace(trace))
        most_held = max(most_held, report.held_calls())
    snap = report.snapshot()
    assert snap["events"] == copies * len(events)
    assert snap["traces"] == copies
    assert snap["failed"] == copies  # the recorded WebFetch fails the guard
    # Failing rows past max_failing are counted, not kept; each kept one
    # holds a bounded window of calls.
    assert len(report.rows) <= 30 + 1  # (+ the open one)
    assert most_held <= 31 * RING
    assert sum(f["traces"] for f in snap["files"].values()) == copies


def test_passing_traces_are_folded_into_their_files(tmp_path: Path) -> None:
    events = _events()
    engine = Engine(load_suite(ROOT / "src" / "trajgrade" / "examples" / "policy.yaml"))
    report = RunReport(max_passing=5)
    for n in range(40):
        batch = [msgspec.structs.replace(e, trace_id=f"t{n}") for e in events]
        report.observe("a.jsonl", batch)
        for event in batch:
            report.send(engine.feed(event))
        report.send(engine.end_trace(f"t{n}"))
    passing = [r for r in report.rows.values() if not r.failed]
    assert len(passing) <= 5
    assert report.snapshot()["files"]["a.jsonl"]["traces"] == 40


def test_the_page_is_replaced_not_rewritten_in_place(tmp_path: Path) -> None:
    path = tmp_path / "run.html"
    sink = ReportSink(str(path), interval=0.0, live=True)
    sink.report.observe("a.jsonl", _events())
    sink.flush()
    first = os.stat(path).st_ino
    assert 'http-equiv="refresh"' in path.read_text()
    sink.flush()
    assert os.stat(path).st_ino != first  # a new file renamed over the old
    sink.close()
    text = path.read_text()
    assert 'http-equiv="refresh"' not in text  # the run is over
    assert "<link" not in text and "src=" not in text  # nothing to fetch
    assert [p.name for p in tmp_path.iterdir()] == ["run.html"]  # no temp left
