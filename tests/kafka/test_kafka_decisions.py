"""Guard decisions of a Kafka run (real broker, real consumer processes):
on the verdicts topic beside the verdicts, in ``--decisions PATH``, and on
stdout with ``--decisions -``; the same decisions batch grading makes."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from trajgrade import load_suite
from trajgrade.kafka.sink import decision_id
from trajgrade.pipeline.whole import grade_bytes

sys.path.insert(0, str(Path(__file__).parent))
import _kafka as k

pytestmark = pytest.mark.slow


def _expected(events: list[dict[str, Any]]) -> set[str]:
    """The batch run's decisions, as their JSON records."""
    data = b"".join(k.line(ev) + b"\n" for ev in events)
    result = grade_bytes(load_suite(k.POLICY), data)
    return {msgspec.json.encode(d).decode() for d in result.decisions}


def test_decisions_go_where_verdicts_go(kafka_bootstrap: str, tmp_path: Path) -> None:
    """The example's leaky agent reads .env (a deny per copy): one process
    writes to a verdicts topic and a decisions file, another (its own group)
    to stdout; each has every decision batch grading makes."""
    topic, out = k.unique("decide"), k.unique("verdicts")
    k.create_topic(kafka_bootstrap, topic, 2)
    events = k.corpus(3)
    k.produce(kafka_bootstrap, topic, k.keyed(events))
    expected = _expected(events)
    assert len(expected) == 3
    verdicts = k.reference(events)
    path = tmp_path / "d.jsonl"
    common = ["--kafka-bootstrap", kafka_bootstrap, "--topic", topic]
    to_topic = k.Grader(
        tmp_path,
        "topic",
        [
            *common,
            "--group",
            k.unique("g"),
            "--verdicts-topic",
            out,
            "--export-decisions",
            "--decisions",
            str(path),
        ],
    )
    to_stdout = k.Grader(
        tmp_path, "stdout", [*common, "--group", k.unique("g"), "--decisions", "-"]
    )
    records: list[Any] = []
    try:

        def on_topic() -> bool:
            records[:] = k.read_topic(kafka_bootstrap, out, 10_000, timeout=1)
            kinds = [r.headers[0][0] for r in records]
            return kinds.count("verdict-id") >= len(verdicts) and kinds.count(
                "decision-id"
            ) >= len(expected)

        k.wait_for(on_topic, 40, "verdicts and decisions on the topic")
        k.wait_for(
            lambda: len(k.finals(to_stdout)) >= len(verdicts), 40, "stdout verdicts"
        )
    finally:
        to_topic.stop()
        to_stdout.stop()
    decided = [r for r in records if r.headers[0][0] == "decision-id"]
    for r in decided:
        d = json.loads(r.value)
        assert d["type"] == "decision"
        assert r.key == d["trace_id"].encode()
        assert list(r.headers) == [("decision-id", decision_id(r.value).encode())]
    assert {r.value.decode() for r in decided} == expected
    assert set(path.read_text().splitlines()) == expected
    lines = to_stdout.out_path.read_text().splitlines()
    assert {x for x in lines if json.loads(x).get("type") == "decision"} == expected
    assert k.finals(to_stdout) == verdicts
    # a decision follows the verdicts of its batch on stdout
    first = next(i for i, x in enumerate(lines) if '"type":"decision"' in x)
    assert first > 0
