"""What a run remembers of the traces that did not pass: a count and the
first few ids, in flat memory (``exit_status.FailedTraces``), through the
terminal summary and checkpoints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from trajgrade.engine.state import EngineState
from trajgrade.runner.store import Checkpoint
from trajgrade.runtime import exit_status as exit_status
from trajgrade.runtime.exit_status import FailedTraces, RunSummary, report


def test_a_trace_counts_once_and_the_first_ones_are_named() -> None:
    failed = FailedTraces()
    for i in range(25):
        failed.add(f"t{i}")
        failed.add(f"t{i}")  # a second failing grader of the same trace
    assert failed.count == 25
    assert failed.first == [f"t{i}" for i in range(10)]
    assert failed.recent() == [f"t{i}" for i in range(25)]


def test_memory_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """However many traces fail, only the most recent ids are kept (a long
    --follow or Kafka run); the count and the first ids stay exact."""
    monkeypatch.setattr(exit_status, "FAILED_MEMORY", 100)
    failed = FailedTraces()
    for i in range(10_000):
        failed.add(f"t{i}")
    assert failed.count == 10_000
    assert failed.first[:3] == ["t0", "t1", "t2"]
    assert failed.recent() == [f"t{i}" for i in range(9_900, 10_000)]


def test_a_checkpoint_keeps_the_count_and_older_ones_still_load() -> None:
    failed = FailedTraces()
    for i in range(12):
        failed.add(f"t{i}")
    ckpt = Checkpoint(
        version=1,
        fingerprint="f",
        sequence=1,
        created=0.0,
        positions=[],
        engine=EngineState(traces=[], closed=[], unopened={}),
        failed_traces=failed.recent(),
        failed_count=failed.count,
        failed_first=failed.first,
    )
    data = msgspec.msgpack.encode(ckpt)
    back = msgspec.msgpack.decode(data, type=Checkpoint)
    again = FailedTraces(
        back.failed_traces, count=back.failed_count, first=back.failed_first
    )
    assert (again.count, again.first) == (12, failed.first)
    # A checkpoint written before the count existed lists every failed id.
    old: dict[str, Any] = msgspec.to_builtins(ckpt)
    del old["failed_count"], old["failed_first"]
    older = msgspec.msgpack.decode(msgspec.msgpack.encode(old), type=Checkpoint)
    assert older.failed_count is None and older.failed_first == []
    restored = FailedTraces(
        older.failed_traces, count=older.failed_count, first=older.failed_first
    )
    assert (restored.count, restored.first) == (12, [f"t{i}" for i in range(10)])


def test_the_summary_names_ten_and_counts_the_rest() -> None:
    lines: list[str] = []
    summary = RunSummary(
        traces=30,
        verdicts={"fail": 25, "pass": 5},
        failed_traces=[f"t{i}" for i in range(10)],
        failed_count=25,
    )

    class _Log:
        def info(self, *args: Any, **kw: Any) -> None: ...

        debug = info

    report(summary, _Log(), pretty=True, quiet=False, echo=lines.append)
    assert (
        lines[-1]
        == "not passed: " + ", ".join(f"t{i}" for i in range(10)) + " (+15 more)"
    )


def test_grade_names_the_first_failed_traces(run_cli, tmp_path: Path) -> None:
    cfg = tmp_path / "p.yaml"
    cfg.write_text("graders:\n  - type: tool-calls\n    config: {disallowed: [rm]}\n")
    log = tmp_path / "log.jsonl"
    log.write_text(
        "".join(
            json.dumps({"trace_id": f"t{i:02}", "type": "tool_call", "name": "rm"})
            + "\n"
            for i in range(13)
        )
    )
    proc = run_cli("grade", "-c", cfg, "--output", "pretty", log)
    assert proc.returncode == 1
    shown = ", ".join(f"t{i:02}" for i in range(10))
    assert proc.stdout.splitlines()[-1] == f"not passed: {shown} (+3 more)"
