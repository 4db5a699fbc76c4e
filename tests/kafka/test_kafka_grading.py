"""Grading a Kafka topic with real consumer processes against a real broker.

Every scenario compares the final verdicts with batch grading of the same
events (``grade_bytes``): consumer groups, crashes, restarts and
repartitioning must not change a verdict, only who emits it (duplicates are
allowed only as identical re-emits, checked by ``finals``).
"""

from __future__ import annotations

import signal
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import _kafka as k

pytestmark = pytest.mark.slow


def _assigned(g: k.Grader) -> list[int] | None:
    """The partitions of a process's latest assignment (None before one)."""
    found = [e for e in g.logs() if e.get("event") == "partitions_assigned"]
    return found[-1]["partitions"] if found else None


def test_single_consumer_matches_batch(kafka_bootstrap: str, tmp_path: Path) -> None:
    """One process grades a 3-partition topic exactly as batch grading does,
    and serves metrics and health while it runs."""
    topic, group = k.unique("single"), k.unique("g")
    k.create_topic(kafka_bootstrap, topic, 3)
    events = k.corpus(6)
    k.produce(kafka_bootstrap, topic, k.keyed(events))
    expected = k.reference(events)
    port = k.free_port()
    g = k.Grader(
        tmp_path,
        "one",
        [
            "--kafka-bootstrap",
            kafka_bootstrap,
            "--topic",
            topic,
            "--group",
            group,
            "--metrics-port",
            str(port),
        ],
    )
    try:
        k.wait_for(lambda: len(k.finals(g)) >= len(expected), 30, "all verdicts")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as r:
            metrics = r.read().decode()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz") as r:
            assert r.status == 200
    finally:
        rc = g.stop()
    assert k.finals(g) == expected
    assert f"trajgrade_events_total {float(len(events))}" in metrics
    assert 'trajgrade_verdicts_total{outcome="fail"}' in metrics
    assert rc == 1  # some traces failed: the grade command's exit status


def test_restart_continues_from_committed_offsets(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """A stopped consumer's successor reads only uncommitted records and
    continues the open traces from the changelog; verdicts go to a topic."""
    topic, group, out = k.unique("restart"), k.unique("g"), k.unique("verdicts")
    k.create_topic(kafka_bootstrap, topic, 2)
    events = k.corpus(4)
    half = len(events) // 2
    k.produce(kafka_bootstrap, topic, k.keyed(events[:half]))
    args = [
        "--kafka-bootstrap",
        kafka_bootstrap,
        "--topic",
        topic,
        "--group",
        group,
        "--verdicts-topic",
        out,
    ]
    first = k.Grader(tmp_path, "first", args)
    try:
        k.wait_for(
            lambda: k.committed(kafka_bootstrap, group, topic, 2) == half,
            30,
            "the first half to be committed",
        )
    finally:
        first.stop()
    k.produce(kafka_bootstrap, topic, k.keyed(events[half:]))
    second = k.Grader(tmp_path, "second", args)
    try:
        expected = k.reference(events)
        records: list[Any] = []

        def complete() -> bool:
            got = k.read_topic(kafka_bootstrap, out, 10_000, timeout=1)
            # guard decisions share the topic (tests/kafka/test_kafka_decisions.py)
            records[:] = [r for r in got if r.headers[0][0] == "verdict-id"]
            ids = {r.headers[0][1].decode() for r in records}
            return all(i in ids for i in expected)

        k.wait_for(complete, 40, "every verdict on the verdicts topic")
    finally:
        second.stop()
    done = [e for e in second.logs() if e.get("event") == "run_finished"]
    assert done
    assert done[0]["events"] == len(events) - half  # nothing re-read
    seen: dict[str, Any] = {}
    for r in records:
        v = k.json.loads(r.value)
        assert r.key == v["trace_id"].encode()
        assert list(r.headers) == [("verdict-id", v["id"].encode())]
        if v["final"]:
            assert seen.setdefault(v["id"], v) == v
    assert seen == expected


def test_two_processes_share_partitions(kafka_bootstrap: str, tmp_path: Path) -> None:
    """Two processes in one group split a 4-partition topic; together they
    give exactly the batch verdicts."""
    topic, group = k.unique("two"), k.unique("g")
    k.create_topic(kafka_bootstrap, topic, 4)
    args = ["--kafka-bootstrap", kafka_bootstrap, "--topic", topic, "--group", group]
    a = k.Grader(tmp_path, "a", args)
    b = k.Grader(tmp_path, "b", args)
    try:
        k.wait_for(
            lambda: len(_assigned(a) or []) == 2 and len(_assigned(b) or []) == 2,
            30,
            "both processes to own two partitions",
        )
        events = k.corpus(8)
        k.produce(kafka_bootstrap, topic, k.keyed(events))
        expected = k.reference(events)
        k.wait_for(lambda: len(k.finals(a, b)) >= len(expected), 30, "all verdicts")
    finally:
        a.stop()
        b.stop()
    assert k.finals(a, b) == expected
    assert k.finals(a) and k.finals(b)


def test_sigkill_survivor_restores_state(kafka_bootstrap: str, tmp_path: Path) -> None:
    """After one of two consumers is SIGKILLed mid-stream, the survivor takes
    its partitions, restores their open traces, and no verdict is lost."""
    topic, group = k.unique("kill"), k.unique("g")
    k.create_topic(kafka_bootstrap, topic, 4)
    args = ["--kafka-bootstrap", kafka_bootstrap, "--topic", topic, "--group", group]
    victim = k.Grader(tmp_path, "victim", args)
    survivor = k.Grader(tmp_path, "survivor", args)
    events = k.corpus(8)
    half = len(events) // 2
    try:
        k.wait_for(
            lambda: (
                len(_assigned(victim) or []) == 2
                and len(_assigned(survivor) or []) == 2
            ),
            30,
            "both processes to own two partitions",
        )
        k.produce(kafka_bootstrap, topic, k.keyed(events[:half]))
        k.wait_for(
            lambda: k.committed(kafka_bootstrap, group, topic, 4) == half,
            30,
            "the first half to be committed",
        )
        victim.stop(signal.SIGKILL)
        k.produce(kafka_bootstrap, topic, k.keyed(events[half:]))
        expected = k.reference(events)
        k.wait_for(
            lambda: len(k.finals(victim, survivor)) >= len(expected),
            40,
            "all verdicts after the takeover",
        )
    finally:
        victim.stop(signal.SIGKILL)
        survivor.stop()
    assert k.finals(victim, survivor) == expected
    takeover = [e for e in survivor.logs() if e.get("event") == "partitions_assigned"]
    assert takeover[-1]["partitions"] == [0, 1, 2, 3]
    assert takeover[-1]["restored_traces"] > 0


def test_unkeyed_topic_with_repartition(kafka_bootstrap: str, tmp_path: Path) -> None:
    """--repartition re-keys unkeyed records by trace id through an internal
    topic, and grading that topic gives the batch verdicts."""
    topic, group = k.unique("unkeyed"), k.unique("g")
    k.create_topic(kafka_bootstrap, topic, 3)
    events = k.corpus(6)
    traces = sorted({ev["trace_id"] for ev in events})
    home = {t: i % 3 for i, t in enumerate(traces)}
    k.produce(
        kafka_bootstrap,
        topic,
        [(None, k.line(ev), home[ev["trace_id"]]) for ev in events],
    )
    expected = k.reference(events)
    g = k.Grader(
        tmp_path,
        "rep",
        [
            "--kafka-bootstrap",
            kafka_bootstrap,
            "--topic",
            topic,
            "--group",
            group,
            "--repartition",
        ],
    )
    try:
        k.wait_for(lambda: len(k.finals(g)) >= len(expected), 40, "all verdicts")
    finally:
        g.stop()
    assert k.finals(g) == expected
    copied = k.read_topic(kafka_bootstrap, f"{group}-{topic}-repartition", len(events))
    assert len(copied) == len(events)
    partition_of: dict[bytes, set[int]] = {}
    for r in copied:
        assert r.key == k.json.loads(r.value)["trace_id"].encode()
        partition_of.setdefault(r.key, set()).add(r.partition)
    assert all(len(ps) == 1 for ps in partition_of.values())


def test_malformed_records_are_reported_and_skipped(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Bad records are logged with topic, partition and offset, taint the
    trace their key names, and cost no other verdict (an empty record is
    no event: reported, nothing tainted)."""
    topic, group = k.unique("bad"), k.unique("g")
    k.create_topic(kafka_bootstrap, topic, 1)
    events = k.corpus(3)
    victim = "c1-fix-timeout"
    items = k.keyed(events)
    items.insert(5, (victim.encode(), b"{not json", None))
    items.insert(9, (b"c2-leaky-agent", b"", None))
    items.insert(12, (None, b'{"type": "tool_call", "name": 3}', None))
    k.produce(kafka_bootstrap, topic, items)
    expected = k.reference(events)
    g = k.Grader(
        tmp_path,
        "bad",
        ["--kafka-bootstrap", kafka_bootstrap, "--topic", topic, "--group", group],
    )
    try:
        k.wait_for(lambda: len(k.finals(g)) >= len(expected), 30, "all verdicts")
    finally:
        g.stop()
    got = k.finals(g)
    assert got.keys() == expected.keys()
    for vid, v in got.items():
        if v["trace_id"] == victim:
            assert v["outcome"] in ("error", "fail"), v
        else:
            assert v == expected[vid]
    assert any(v["outcome"] == "error" for v in got.values() if v["trace_id"] == victim)
    rejected = [e for e in g.logs() if e.get("event") == "input_rejected"]
    assert {(e["partition"], e["offset"]) for e in rejected} >= {
        (0, 5),
        (0, 9),
        (0, 12),
    }
    assert all(e["topic"] == topic for e in rejected)
    by_offset = {e["offset"]: e for e in rejected}
    assert by_offset[5]["trace"] == victim
    assert "not valid JSON" in by_offset[5]["reason"]


def test_trace_on_two_partitions_is_reported(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """A trace whose events arrive on two partitions is logged as split and
    ends in error verdicts marked with both partitions, not silently graded."""
    topic, group = k.unique("split"), k.unique("g")
    k.create_topic(kafka_bootstrap, topic, 2)
    events = k.corpus(2)
    split = "c0-fix-timeout"
    mine = [ev for ev in events if ev["trace_id"] == split]
    rest = [ev for ev in events if ev["trace_id"] != split]
    cut = len(mine) // 2
    first = [(None, k.line(ev), 0) for ev in mine[:cut]]
    first += [(ev["trace_id"].encode(), k.line(ev), 0) for ev in rest]
    k.produce(kafka_bootstrap, topic, first)
    expected = k.reference(rest)
    g = k.Grader(
        tmp_path,
        "split",
        ["--kafka-bootstrap", kafka_bootstrap, "--topic", topic, "--group", group],
    )
    try:
        # The second half goes to partition 1 once the first is graded, so
        # the split is seen while the trace is open on partition 0.
        k.wait_for(
            lambda: k.committed(kafka_bootstrap, group, topic, 2) == len(first),
            30,
            "partition 0 to be graded",
        )
        k.produce(kafka_bootstrap, topic, [(None, k.line(ev), 1) for ev in mine[cut:]])
        k.wait_for(
            lambda: any(v["trace_id"] == split for v in k.finals(g).values()),
            30,
            "verdicts of the split trace",
        )
    finally:
        g.stop()
    got = k.finals(g)
    assert {i: v for i, v in got.items() if v["trace_id"] != split} == expected
    mine_v = [v for v in got.values() if v["trace_id"] == split]
    assert any(v["outcome"] == "error" for v in mine_v)
    assert all(v["metadata"]["kafka_split_partitions"] == "0,1" for v in mine_v)
    logged = [e for e in g.logs() if e.get("event") == "trace_split"]
    assert [e["trace"] for e in logged] == [split]


def test_state_of_another_config_is_refused(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """A consumer whose config differs from the one that wrote the changelog
    stops with exit status 2 and says how to start fresh."""
    topic, group = k.unique("fp"), k.unique("g")
    k.create_topic(kafka_bootstrap, topic, 1)
    events = [ev for ev in k.corpus(1) if ev["type"] != "trace_end"]
    k.produce(kafka_bootstrap, topic, k.keyed(events))
    args = ["--kafka-bootstrap", kafka_bootstrap, "--topic", topic, "--group", group]
    first = k.Grader(tmp_path, "first", args)
    try:
        k.wait_for(
            lambda: k.committed(kafka_bootstrap, group, topic, 1) == len(events),
            30,
            "the events to be committed",
        )
    finally:
        first.stop()
    other = tmp_path / "other.yaml"
    other.write_text("graders:\n  - type: token-budget\n    config: {max: 10}\n")
    second = k.Grader(tmp_path, "second", args, config=other)
    try:
        second.proc.wait(30)
    finally:
        rc = second.stop()
    assert rc == 2
    err = second.err_path.read_text()
    assert "holds state written with another grader config" in err
    assert "use a new --group" in err


def test_on_fail_and_fail_fast_on_a_topic(kafka_bootstrap: str, tmp_path: Path) -> None:
    """``--on-fail`` runs once per failed trace and ``--fail-fast`` ends the
    consumer by itself (exit 1) once a fail is seen."""
    topic, group = k.unique("actions"), k.unique("g")
    k.create_topic(kafka_bootstrap, topic, 2)
    events = k.corpus(3)
    k.produce(kafka_bootstrap, topic, k.keyed(events))
    failed = {
        v["trace_id"] for v in k.reference(events).values() if v["outcome"] != "pass"
    }
    assert failed
    marks = tmp_path / "failed"
    marks.mkdir()
    g = k.Grader(
        tmp_path,
        "actions",
        [
            "--kafka-bootstrap",
            kafka_bootstrap,
            "--topic",
            topic,
            "--group",
            group,
            "--on-fail",
            f'touch {marks}/"$TRAJGRADE_TRACE_ID"',
            "--fail-fast",
        ],
    )
    try:
        g.proc.wait(60)
    finally:
        rc = g.stop()
    assert rc == 1
    touched = {p.name for p in marks.iterdir()}
    assert touched
    assert touched <= failed
    assert any(log.get("event") == "fail_fast" for log in g.logs())


def test_open_trace_cap_and_idle_timeout(kafka_bootstrap: str, tmp_path: Path) -> None:
    """Traces without an end: past ``--max-open-traces`` the least recently
    active one is closed early (logged); the rest close after
    ``--idle-timeout`` while the consumer keeps running."""
    topic, group = k.unique("open"), k.unique("g")
    k.create_topic(kafka_bootstrap, topic, 1)
    events = [
        {"trace_id": f"t{i}", "type": "turn_start", "ts": 1767225600.0 + i}
        for i in range(5)
    ]
    k.produce(kafka_bootstrap, topic, k.keyed(events))
    g = k.Grader(
        tmp_path,
        "open",
        [
            "--kafka-bootstrap",
            kafka_bootstrap,
            "--topic",
            topic,
            "--group",
            group,
            "--max-open-traces",
            "2",
            "--idle-timeout",
            "1",
        ],
    )
    try:
        # Every trace gets its final verdicts with no end event and no stop.
        k.wait_for(
            lambda: (
                {v["trace_id"] for v in g.verdicts() if v["final"]}
                == {f"t{i}" for i in range(5)}
            ),
            45,
            "final verdicts of all five traces",
        )
        assert g.proc.poll() is None
    finally:
        g.stop()
    evicted = [x for x in g.logs() if x.get("event") == "trace_evicted"]
    assert {x["trace"] for x in evicted} == {"t0", "t1", "t2"}

    # Closing early or on idle gives the verdicts the trace's events give
    # (wall-time also counts the runner's clock while the trace sat idle).
    def clockless(finals: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return {i: v for i, v in finals.items() if v["grader"] != "wall-time"}

    assert clockless(k.finals(g)) == clockless(k.reference(events))


def test_junit_report_of_a_kafka_run(kafka_bootstrap: str, tmp_path: Path) -> None:
    """`--junit` on a Kafka run used to write nothing: the runner never
    closed the command's sinks (and with --verdicts-topic it did not feed
    them at all). Now the report is written when the run stops, with every
    final verdict, whether verdicts go to stdout or to a topic."""
    from junitparser import JUnitXml

    topic, out = k.unique("junit"), k.unique("verdicts")
    k.create_topic(kafka_bootstrap, topic, 2)
    events = k.corpus(2)
    k.produce(kafka_bootstrap, topic, k.keyed(events))
    expected = k.reference(events)
    failed = sum(v["outcome"] != "pass" for v in expected.values())
    common = ["--kafka-bootstrap", kafka_bootstrap, "--topic", topic]
    reports = {"stdout": tmp_path / "stdout.xml", "topic": tmp_path / "topic.xml"}
    to_stdout = k.Grader(
        tmp_path,
        "stdout",
        [*common, "--group", k.unique("g"), "--junit", str(reports["stdout"])],
    )
    to_topic_args = [*common, "--group", k.unique("g"), "--verdicts-topic", out]
    to_topic = k.Grader(
        tmp_path, "topic", [*to_topic_args, "--junit", str(reports["topic"])]
    )
    try:
        k.wait_for_finals(to_stdout, len(expected))
        k.wait_for(
            lambda: (
                sum(
                    b'"final":true' in r.value
                    for r in k.read_topic(kafka_bootstrap, out, 10_000, timeout=1)
                )
                >= len(expected)
            ),
            40,
            "final verdicts on the topic",
        )
    finally:
        codes = (to_stdout.stop(), to_topic.stop())
    assert codes == (1, 1), (to_stdout.err_path.read_text(), codes)
    for name, path in reports.items():
        assert path.exists(), f"no report from the {name} run"
        xml = JUnitXml.fromfile(str(path))
        assert (xml.tests, xml.failures, xml.errors) == (len(expected), failed, 0)


def test_dataset_rows_unmatched_on_a_kafka_run(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """`--dataset` on a Kafka run: at the stop, one warning counts the rows
    that matched no trace and the traces with no row over every partition."""
    topic = k.unique("dataset")
    k.create_topic(kafka_bootstrap, topic, 2)
    events = k.corpus(2)  # traces c0-… and c1-…, two per copy
    k.produce(kafka_bootstrap, topic, k.keyed(events))
    traces = sorted({ev["trace_id"] for ev in events})
    rows = tmp_path / "rows.jsonl"
    # One row fits a trace; the other two are keyed as no trace is.
    rows.write_text(
        f'{{"id": "{traces[0]}"}}\n{{"id": "session-1"}}\n{{"id": "session-2"}}\n'
    )
    g = k.Grader(
        tmp_path,
        "dataset",
        [
            *("--kafka-bootstrap", kafka_bootstrap, "--topic", topic),
            *("--group", k.unique("g"), "--dataset", str(rows)),
        ],
    )
    try:
        k.wait_for_finals(g, len(k.reference(events)))
    finally:
        g.stop()
    [warning] = [e for e in g.logs() if e.get("event") == "dataset_unmatched"]
    assert (warning["rows_unmatched"], warning["traces_without_row"]) == (
        2,
        len(traces) - 1,
    )
    assert f"dataset {rows}: 2 of 3 rows matched no trace" in warning["reason"]
    [finished] = [e for e in g.logs() if e.get("event") == "run_finished"]
    assert finished["dataset"]["traces_with_row"] == 1
