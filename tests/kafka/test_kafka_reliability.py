"""Hostile records on a real broker (tansu): a poison record is skipped,
counted and committed past, so a restart does not meet it again; the other
traces' verdicts are exactly batch grading's."""

from __future__ import annotations

import os
import sys
import time
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import _kafka as k

pytestmark = pytest.mark.slow


def test_poison_records_are_skipped_counted_and_committed(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    topic, group = k.unique("poison"), k.unique("g")
    k.create_topic(kafka_bootstrap, topic, 1)
    events = k.corpus(3)
    victim = "c1-fix-timeout"
    deep = b'{"type":"tool_call","trace_id":"' + victim.encode() + b'","args":'
    deep += b"[" * 100_000 + b"]" * 100_000 + b"}"
    result = b'{"type":"tool_result","trace_id":"' + victim.encode() + b'",'
    result += b'"call_id":"x","result":' + b"[" * 600 + b"]" * 600 + b"}"
    poison = [
        deep,  # RecursionError in the decoder before the fix: a crash loop
        result,
        bytes(range(256)) * 64,  # binary
        b"\x00\x00\x00",
        b"\xef\xbb\xbf" + k.line({**events[0], "trace_id": victim}),  # BOM
        b'{"type":"tool_call","trace_id":"' + victim.encode() + b'","name":"\xff\xfe"}',
    ]
    items = k.keyed(events)
    for i, value in enumerate(poison):
        items.insert(3 + 4 * i, (victim.encode(), value, None))
    k.produce(kafka_bootstrap, topic, items)
    expected = k.reference(events)
    args = ["--kafka-bootstrap", kafka_bootstrap, "--topic", topic, "--group", group]
    port = k.free_port()
    g = k.Grader(tmp_path, "poison", [*args, "--metrics-port", str(port)])
    metrics = ""

    def counted() -> bool:
        nonlocal metrics
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as r:
            metrics = r.read().decode()
        return 'trajgrade_dropped_events_total{reason="rejected_record"} 6.0' in metrics

    try:
        k.wait_for(lambda: len(k.finals(g)) >= len(expected), 60, "all verdicts")
        k.wait_for(
            lambda: k.committed(kafka_bootstrap, group, topic, 1) == len(items),
            30,
            "the offsets past every record to be committed",
        )
        k.wait_for(counted, 30, "the rejected records on /metrics")
    finally:
        rc = g.stop()
    assert "Traceback" not in g.err_path.read_text()
    got = k.finals(g)
    assert got.keys() == expected.keys()
    for vid, v in got.items():
        if v["trace_id"] != victim:
            assert v == expected[vid]
    assert any(v["outcome"] == "error" for v in got.values() if v["trace_id"] == victim)
    rejected = {e["offset"] for e in g.logs() if e.get("event") == "input_rejected"}
    assert len(rejected) == len(poison)
    [done] = [e for e in g.logs() if e.get("event") == "run_finished"]
    assert done["input_errors"] == len(poison)
    assert done["dropped_events"]["rejected_record"] == len(poison)
    assert rc == 1  # some traces of the corpus fail by design

    # A restart meets none of it again: everything was committed.
    again = k.Grader(tmp_path, "again", args)
    try:
        k.wait_for(
            lambda: any(e.get("event") == "partitions_assigned" for e in again.logs()),
            30,
            "the restarted consumer to join",
        )
    finally:
        again.stop()
    [done] = [e for e in again.logs() if e.get("event") == "run_finished"]
    assert done["events"] == 0
    assert "Traceback" not in again.err_path.read_text()


@pytest.mark.xfail(
    os.environ.get("PYTEST_XDIST_WORKER") is not None,
    strict=False,
    reason="in the parallel suite (a broker per worker) the consumer did not log "
    "changelog_lost within 90 s of its broker's restart in 3 of 4 runs; it passes "
    "run alone and in the serial suite: to be found (issue 35, item 5)",
)
@pytest.mark.parametrize("recreated_by", ["consumer", "someone_else"])
def test_lost_changelog_is_recreated_and_sigterm_is_prompt(
    tmp_path: Path, recreated_by: str
) -> None:
    """The broker restarts with its data lost and the input topic is created
    again: the consumer's next assignment finds the changelog's records gone
    (logged as ``changelog_lost`` whoever created the topic again: this
    consumer's check, or, as ``someone_else`` plays, a client's metadata
    request auto-creating it before that check) and goes on grading the new
    records; SIGTERM then ends the run within seconds."""
    broker = k.OwnBroker(tmp_path)
    broker.start()
    topic, group = k.unique("lost"), k.unique("g")
    try:
        k.create_topic(broker.bootstrap, topic, 2)
        events = k.corpus(2)
        k.produce(broker.bootstrap, topic, k.keyed(events))
        expected = k.reference(events)
        g = k.Grader(
            tmp_path,
            "lost",
            ["--kafka-bootstrap", broker.bootstrap, "--topic", topic, "--group", group],
        )
        try:
            k.wait_for(lambda: len(k.finals(g)) >= len(expected), 60, "all verdicts")
            broker.stop()
            broker.start()  # memory storage: topics, offsets, changelog gone
            if recreated_by == "someone_else":
                k.create_topic(broker.bootstrap, f"{group}-{topic}-changelog", 2)
            k.create_topic(broker.bootstrap, topic, 2)
            again = [{**ev, "trace_id": "again-" + ev["trace_id"]} for ev in events]
            k.produce(broker.bootstrap, topic, k.keyed(again))
            k.wait_for(
                lambda: any(e.get("event") == "changelog_lost" for e in g.logs()),
                90,
                "the lost changelog to be logged",
            )
            want = {v["trace_id"] for v in k.reference(again).values()}
            k.wait_for(
                lambda: want <= {v["trace_id"] for v in g.verdicts() if v["final"]},
                60,
                "the new records to be graded",
            )
        finally:
            started = time.monotonic()
            g.stop(timeout=60)
            took = time.monotonic() - started
        assert "Traceback" not in g.err_path.read_text()
        assert took < 15, f"SIGTERM took {took:.1f}s"
    finally:
        broker.stop()
        broker.log.close()
