"""What production brokers and producers do to a consumer, on a real broker
(tansu): compressed batches of every codec Kafka has, topics that are
misnamed or missing, a changelog deleted under a running consumer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import _kafka as k

pytestmark = pytest.mark.slow


def test_batches_of_every_codec_are_graded(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Producers (the Collector's Kafka exporter, Java clients) and topics with
    ``compression.type`` compress batches with snappy, lz4 or zstd. Before
    the fix every poll of such a batch raised UnsupportedCodecError: a
    traceback, exit status 1 (read as "a trace failed"), a crash loop."""
    topic, group = k.unique("codecs"), k.unique("g")
    k.create_topic(kafka_bootstrap, topic, 1)
    events = k.corpus(4)
    codecs = ["gzip", "snappy", "lz4", "zstd"]
    step = -(-len(events) // len(codecs))
    for i, codec in enumerate(codecs):
        chunk = k.keyed(events[i * step : (i + 1) * step])
        k.produce(kafka_bootstrap, topic, chunk, compression=codec)
    # A tombstone: rejected and counted; it names a trace that never opens.
    k.produce(kafka_bootstrap, topic, [(b"tomb", None, None)], compression="zstd")
    expected = k.reference(events)
    g = k.Grader(
        tmp_path,
        "codecs",
        ["--kafka-bootstrap", kafka_bootstrap, "--topic", topic, "--group", group],
    )
    try:
        k.wait_for_finals(g, len(expected))
    finally:
        g.stop()
    assert "Traceback" not in g.err_path.read_text()
    assert k.finals(g) == expected
    rejected = [e for e in g.logs() if e.get("event") == "input_rejected"]
    assert [e["trace"] for e in rejected] == ["tomb"]


@pytest.mark.parametrize(
    ("option", "value", "reason"),
    [
        ("--verdicts-topic", "agent verdicts!", "not a legal Kafka topic name"),
        ("--group", "g" * 240, "not a legal Kafka topic name"),
        ("--verdicts-topic", "", "is a topic this run reads"),  # (the input)
    ],
)
def test_topic_names_a_run_cannot_use_are_usage_errors(
    kafka_bootstrap: str, option: str, value: str, reason: str
) -> None:
    """Before the fix, an illegal verdicts topic held the first batch (and
    SIGTERM) for 40 s, then ended the run with a traceback and status 1;
    verdicts written to the input topic came back as rejected records."""
    topic = k.unique("names")
    value = value or topic
    k.create_topic(kafka_bootstrap, topic, 1)
    k.produce(kafka_bootstrap, topic, k.keyed(k.corpus(1)))
    args = ["--kafka-bootstrap", kafka_bootstrap, "--topic", topic, option, value]
    done = subprocess.run(
        [sys.executable, "-m", "trajgrade", "grade", "-c", str(k.POLICY), *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert option in done.stderr
    assert reason in done.stderr


def _delete_topic(bootstrap: str, topic: str) -> None:
    async def go() -> None:
        from aiokafka.admin import AIOKafkaAdminClient

        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            await admin.delete_topics([topic])
        finally:
            await admin.close()

    k.asyncio.run(go())


@pytest.mark.parametrize("recreated_with", [None, 3])
def test_a_changelog_deleted_under_a_running_consumer(
    kafka_bootstrap: str, tmp_path: Path, recreated_with: int | None
) -> None:
    """The changelog is deleted while a consumer runs (``recreated_with``:
    and created again by someone with 3 partitions, as a broker's
    ``num.partitions`` would). Before the fix the consumer wrote on into
    whatever topic a write created (tansu: 4 partitions; neither compacted)
    and said nothing, so the state of the traces it did not touch again was
    gone, and its restart refused the topic; on Apache Kafka with one
    default partition the write to partition 1 raised a bare AssertionError.
    Now the changelog is created again as it should be and every open
    trace's state is written to it again, or the run ends (status 2)."""
    topic, group = k.unique("gone"), k.unique("g")
    changelog = f"{group}-{topic}-changelog"
    k.create_topic(kafka_bootstrap, topic, 2)
    events = k.corpus(2)
    half = len(events) // 2
    # c0-* traces get no event between the deletion and the restart.
    first = events[:half]
    middle = [ev for ev in events[half:] if ev["trace_id"].startswith("c1-")]
    last = [ev for ev in events[half:] if ev["trace_id"].startswith("c0-")]
    k.produce(kafka_bootstrap, topic, k.keyed(first))
    args = ["--kafka-bootstrap", kafka_bootstrap, "--topic", topic, "--group", group]
    g = k.Grader(tmp_path, "gone", args)
    try:
        k.wait_for(
            lambda: k.committed(kafka_bootstrap, group, topic, 2) == len(first),
            30,
            "the first half to be committed",
        )
        _delete_topic(kafka_bootstrap, changelog)
        if recreated_with is not None:
            k.create_topic(kafka_bootstrap, changelog, recreated_with)
        k.produce(kafka_bootstrap, topic, k.keyed(middle))
        if recreated_with is not None:
            k.wait_for(lambda: g.proc.poll() is not None, 60, "the run to end")
        else:
            k.wait_for(
                lambda: (
                    k.committed(kafka_bootstrap, group, topic, 2)
                    == len(first) + len(middle)
                ),
                30,
                "the middle to be committed",
            )
    finally:
        rc = g.stop()
    err = g.err_path.read_text()
    assert "Traceback" not in err
    if recreated_with is not None:
        assert rc == 2, err[-2000:]
        assert f"changelog '{changelog}' partition" in err
        assert f"has {recreated_with} partitions but the input has 2" in err
        # Nothing past the lost state was committed: it is graded again.
        assert k.committed(kafka_bootstrap, group, topic, 2) == len(first)
        return
    assert [e["topic"] for e in g.logs() if e.get("event") == "changelog_lost"] == [
        changelog
    ]
    # The successor restores the c0-* traces from the changelog written again.
    k.produce(kafka_bootstrap, topic, k.keyed(last))
    again = k.Grader(tmp_path, "again", args)
    expected = k.reference(events)
    try:
        k.wait_for(lambda: len(k.finals(g, again)) >= len(expected), 60, "all verdicts")
    finally:
        again.stop()
    assert "Traceback" not in again.err_path.read_text()
    assert k.finals(g, again) == expected


def test_a_record_too_large_to_repartition_taints_its_trace(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Before the fix, a record the repartition topic could not take (over
    the producer's 16 MiB, or the topic's ``max.message.bytes``) ended the
    run, and every restart met it again: the topic stalled for good."""
    topic, group = k.unique("big"), k.unique("g")
    k.create_topic(kafka_bootstrap, topic, 1)
    events = k.corpus(2)
    victim = events[0]["trace_id"]
    big = {"type": "tool_call", "trace_id": victim, "name": "Bash"}
    big["args"] = {"command": "x" * (17 << 20)}
    items = k.keyed(events)
    items.insert(4, (None, k.line(big), None))  # not keyed: --repartition's job
    k.produce(kafka_bootstrap, topic, items)
    expected = k.reference(events)
    args = ["--kafka-bootstrap", kafka_bootstrap, "--topic", topic, "--group", group]
    g = k.Grader(tmp_path, "big", [*args, "--repartition"])
    try:
        k.wait_for_finals(g, len(expected))
    finally:
        g.stop()
    assert "Traceback" not in g.err_path.read_text()
    got = k.finals(g)
    assert got.keys() == expected.keys()
    for vid, v in got.items():
        if v["trace_id"] != victim:
            assert v == expected[vid]
    assert {v["outcome"] for v in got.values() if v["trace_id"] == victim} == {"error"}
    [rejected] = [
        e
        for e in g.logs()
        if e.get("event") == "input_rejected" and e.get("topic") == topic
    ]
    assert (rejected["offset"], rejected["trace"]) == (4, victim)


def test_a_missing_input_topic_is_reported_not_created(kafka_bootstrap: str) -> None:
    """Before the fix the partition count was asked with a metadata request
    that creates a missing topic on brokers with auto.create.topics.enable
    (Apache Kafka's default): a misspelt --topic was created with the
    broker's defaults and the consumer waited on it forever."""
    topic = k.unique("misspelt")
    args = ["--kafka-bootstrap", kafka_bootstrap, "--topic", topic, *k.FAST]
    done = subprocess.run(
        [sys.executable, "-m", "trajgrade", "grade", "-c", str(k.POLICY), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 7, done.stderr[-2000:]  # (a missing topic: 7)
    assert f"topic {topic!r} was not found" in done.stderr
    assert topic not in k.list_topics(kafka_bootstrap)


#: Writes one record whose header key is not UTF-8 (Kafka does not check;
#: aiokafka's pure-Python builder encodes keys with ``str.encode``).
_BAD_HEADER = """
import asyncio, sys
from aiokafka import AIOKafkaProducer

class Raw(str):
    def encode(self, *args, **kwargs):
        return b"\\xff\\xfe"

async def main(bootstrap, topic, partition, value):
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(
            topic, value=value.encode(), partition=int(partition), headers=[(Raw("k"), b"v")]
        )
    finally:
        await producer.stop()

asyncio.run(main(*sys.argv[1:]))
"""


def test_a_record_the_client_cannot_decode_is_skipped(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Before the fix a header key that is not UTF-8 raised from getmany: a
    traceback, and every restart met the record again (the partition stalled
    for good); records of the other partition taken by the same poll were
    dropped with the error, their positions already past them."""
    topic, group = k.unique("undecodable"), k.unique("g")
    k.create_topic(kafka_bootstrap, topic, 2)
    events = k.corpus(4)
    half = len(events) // 2
    for p in (0, 1):
        mine = [(key, value, p) for key, value, _ in k.keyed(events[:half])]
        k.produce(kafka_bootstrap, topic, mine[p::2])
    stray = k.line({"type": "message", "trace_id": "stray", "role": "user"})
    subprocess.run(
        [
            sys.executable,
            "-c",
            _BAD_HEADER,
            kafka_bootstrap,
            topic,
            "0",
            stray.decode(),
        ],
        env={**k.os.environ, "AIOKAFKA_NO_EXTENSIONS": "1"},
        check=True,
        timeout=60,
    )
    for p in (0, 1):
        mine = [(key, value, p) for key, value, _ in k.keyed(events[half:])]
        k.produce(kafka_bootstrap, topic, mine[p::2])
    expected = k.reference(events[0::2] + events[1::2])
    args = ["--kafka-bootstrap", kafka_bootstrap, "--topic", topic, "--group", group]
    g = k.Grader(tmp_path, "undecodable", args)
    try:
        k.wait_for_finals(g, len(expected))
        k.wait_for(
            lambda: k.committed(kafka_bootstrap, group, topic, 2) == len(events) + 1,
            30,
            "everything committed, the undecodable record too",
        )
    finally:
        g.stop()
    assert "Traceback" not in g.err_path.read_text()
    assert k.finals(g) == expected
    [rejected] = [e for e in g.logs() if e.get("event") == "input_rejected"]
    assert (rejected["partition"], rejected["offset"]) == (0, (half + 1) // 2)
