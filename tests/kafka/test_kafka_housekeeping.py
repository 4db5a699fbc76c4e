"""A Kafka run grades a poll, and closes quiet traces, part by part.

An idle timeout after a burst of sessions can close every open trace of a
partition at once (``deploy/`` runs 200,000 under a 1 GiB limit); built as
one list, their verdicts took about 1.4 KB each, a crash that a restart
from the changelog would repeat. ``_Grader._housekeeping`` yields the
verdicts of at most ``CLOSE_PART`` traces at a time and closes the next
part only when asked, after the one before is written; a poll's records
are graded ``EMIT_EVENTS`` at a time the same way (ten thousand ends in one
poll). No broker is needed: the run state and its partition workers are the real ones, only
nothing is polled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import structlog

from trajgrade import load_suite
from trajgrade.kafka.changelog import decode_entry
from trajgrade.kafka.grading import CLOSE_PART, _Grader
from trajgrade.kafka.options import KafkaOptions
from trajgrade.kafka.partition import PartitionWorker
from trajgrade.pipeline.grading import EMIT_EVENTS
from trajgrade.runner.options import RunOptions

if TYPE_CHECKING:
    from pathlib import Path

SUITE = """\
graders:
  - {type: tool-calls, name: forbidden, config: {disallowed: ["^web_fetch$"]}}
  - {type: tool-call-count, name: few, config: {max: 3}}
"""


class _Record:
    """What the worker reads of a consumer record."""

    def __init__(self, value: bytes, offset: int) -> None:
        self.value = value
        self.offset = offset
        self.key = None


def _records(traces: int) -> list[_Record]:
    """One record per trace: a call, and no end."""
    return [
        _Record(b'{"trace_id":"t%d","type":"tool_call","name":"bash","args":{}}' % i, i)
        for i in range(traces)
    ]


def _run_state(
    tmp_path: Path, traces: int, *, cap: int = 1_000_000
) -> tuple[_Grader, Any]:
    config = tmp_path / "suite.yaml"
    config.write_text(SUITE)
    suite = load_suite(config)
    options = RunOptions(inputs=[], fmt="trajgrade", idle_timeout=10.0)
    kafka = KafkaOptions(bootstrap="127.0.0.1:9", topic="events", max_open_traces=cap)
    state = _Grader(suite, options, kafka, None, structlog.get_logger(), None)  # type: ignore[arg-type]
    worker = PartitionWorker(
        "events",
        0,
        suite,
        fmt="trajgrade",
        max_line_bytes=1 << 20,
        samples=None,
        restored=None,
    )
    state.workers[0] = worker
    decoded, problems = worker.decode(_records(traces))
    assert not problems
    for _ in worker.feed_parts(decoded, now=100.0):
        pass
    state._track(worker, [f"t{i}" for i in range(traces)])
    return state, worker


def test_an_idle_timeout_closes_quiet_traces_a_part_at_a_time(tmp_path: Path) -> None:
    traces = 2 * CLOSE_PART + 100
    state, worker = _run_state(tmp_path, traces)
    touched: dict[int, set[str]] = {}
    parts = state._housekeeping(200.0, touched)
    sizes = []
    for part in parts:
        if not part:
            continue
        names = {v.trace_id for v in part}
        assert len(names) <= CLOSE_PART
        assert all(v.final for v in part)
        # Lazy: the traces of later parts are still open while this part is
        # handed out to be written.
        assert worker.engine.statistics().open_traces == traces - sum(sizes) - len(
            names
        )
        sizes.append(len(names))
    assert sizes == [CLOSE_PART, CLOSE_PART, 100]
    assert worker.engine.statistics().open_traces == 0
    # The partition is named (so the step writes its changelog), its closed
    # traces are not: their markers come from the engine's closes, not from
    # a set of every id the pass closed.
    assert touched == {0: set()}
    written = {
        key.decode(): None if value is None else decode_entry(value).kind
        for key, value in worker.changelog(touched[0])
    }
    assert written == {f"t{i}": "closed" for i in range(traces)}
    assert not state.lru


def test_the_open_trace_cap_evicts_a_part_at_a_time(tmp_path: Path) -> None:
    traces = CLOSE_PART + 10
    state, worker = _run_state(tmp_path, traces, cap=5)
    state.options = RunOptions(inputs=[], fmt="trajgrade")  # no idle timeout
    parts = [p for p in state._housekeeping(100.0, {}) if p]
    assert [len({v.trace_id for v in p}) for p in parts] == [
        CLOSE_PART,
        traces - 5 - CLOSE_PART,
    ]
    # The least recently active go first.
    assert parts[0][0].trace_id == "t0"
    assert worker.engine.statistics().open_traces == 5


def test_a_poll_of_many_ends_is_graded_a_part_at_a_time(tmp_path: Path) -> None:
    traces = EMIT_EVENTS + 500
    _, worker = _run_state(tmp_path, traces)
    ends = [
        _Record(b'{"trace_id":"t%d","type":"trace_end"}' % i, traces + i)
        for i in range(traces)
    ]
    decoded, problems = worker.decode(ends)
    assert not problems
    sizes = []
    for part in worker.feed_parts(decoded, now=101.0):
        names = {v.trace_id for v in part}
        # Lazy: the next part's traces are still open while this one is out.
        assert worker.engine.statistics().open_traces == traces - sum(sizes) - len(
            names
        )
        sizes.append(len(names))
    assert sizes == [EMIT_EVENTS, 500]
    assert worker.position == decoded.end
    assert worker.batch_problems(decoded) == []
