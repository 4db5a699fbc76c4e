"""What a partition writes to its changelog, without a broker.

A closed trace gets one ``closed`` marker, in the step that closed it, also
when no record of that step named it; its late events write nothing; and
a marker is tombstoned when the partition's engine forgets the id (past
its closed-trace memory), unless the id is open again. The engine's list
of closes is the partition's only memory of its markers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from trajgrade import load_suite
from trajgrade.kafka.changelog import decode_entry
from trajgrade.kafka.partition import PartitionWorker

if TYPE_CHECKING:
    from pathlib import Path

SUITE = "graders:\n  - {type: tool-calls, name: t, config: {required: [bash]}}\n"


class _Record:
    def __init__(self, value: bytes, offset: int) -> None:
        self.value = value
        self.offset = offset
        self.key = None


def _worker(tmp_path: Path) -> PartitionWorker:
    config = tmp_path / "suite.yaml"
    config.write_text(SUITE)
    return PartitionWorker(
        "events",
        0,
        load_suite(config),
        fmt="trajgrade",
        max_line_bytes=1 << 20,
        samples=None,
        restored=None,
    )


def _step(worker: PartitionWorker, lines: list[bytes]) -> dict[str, str | None]:
    """Grade ``lines`` as one poll; the changelog records it writes, as
    trace id -> entry kind (None: a tombstone)."""
    records = [_Record(line, i) for i, line in enumerate(lines)]
    decoded, problems = worker.decode(records)
    assert not problems
    names = decoded.trace_ids(worker.default_trace)
    for out in worker.feed_parts(decoded, 100.0):
        names.update(v.trace_id for v in out)
    return {
        key.decode(): None if value is None else decode_entry(value).kind
        for key, value in worker.changelog(names)
    }


def _ended(tid: str) -> list[bytes]:
    return [
        b'{"trace_id":"%s","type":"tool_call","name":"bash","args":{}}' % tid.encode(),
        b'{"trace_id":"%s","type":"trace_end"}' % tid.encode(),
    ]


def test_closes_are_marked_once_and_forgotten_ids_are_tombstoned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("trajgrade.engine.engine.CLOSED_MEMORY", 3)
    worker = _worker(tmp_path)
    opened = b'{"trace_id":"o","type":"tool_call","name":"bash","args":{}}'
    first = _step(worker, [opened, *_ended("a"), *_ended("b")])
    assert first == {"o": "open", "a": "closed", "b": "closed"}
    # A late event of a closed trace changes nothing: nothing is written.
    assert _step(worker, [b'{"trace_id":"a","type":"turn_start"}']) == {}
    # Two more closes: the engine (memory: 3 ids) forgets a, whose marker goes.
    assert _step(worker, [*_ended("c"), *_ended("d")]) == {
        "c": "closed",
        "d": "closed",
        "a": None,
    }
    # A trace closed with no record of the step naming it (an idle close,
    # the open-trace cap) is marked too.
    worker.engine.end_trace("o")
    assert {
        k.decode(): None if v is None else decode_entry(v).kind
        for k, v in worker.changelog(set())
    } == {"o": "closed", "b": None}


def test_a_forgotten_id_open_again_keeps_its_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("trajgrade.engine.engine.CLOSED_MEMORY", 1)
    worker = _worker(tmp_path)
    _step(worker, _ended("a"))
    # a is forgotten by b's close, and a record of a opens it again in the
    # same step: its open state is written, not a tombstone after it.
    again = b'{"trace_id":"a","type":"tool_call","name":"bash","args":{}}'
    assert _step(worker, [*_ended("b"), again]) == {"b": "closed", "a": "open"}


def test_taints_the_engine_lets_go_are_tombstoned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Records naming traces none of whose records could be read taint those
    traces (a ``taint`` entry each); past the engine's bound the oldest is
    let go, and its entry goes, so hostile records cannot grow a partition's
    memory or its changelog without end."""
    monkeypatch.setattr("trajgrade.engine.engine.CLOSED_MEMORY", 2)
    worker = _worker(tmp_path)

    def bad(tid: str) -> bytes:
        return b'{"trace_id":"%s","type":"tool_call","name":7}' % tid.encode()

    records = [_Record(bad(t), i) for i, t in enumerate("abc")]
    decoded, _ = worker.decode(records)
    for _ in worker.feed_parts(decoded, 100.0):
        pass
    written = {
        key.decode(): None if value is None else decode_entry(value).kind
        for key, value in worker.changelog(set("abc"))
    }
    assert written == {"a": None, "b": "taint", "c": "taint"}
    assert sorted(worker.engine.checkpoint().unopened) == ["b", "c"]
    # The partition's own copy of the taints is let go with them.
    assert len(worker._taints) == 2
