"""What production brokers and producers do to a consumer, on a real broker
(tansu): compressed batches of every codec Kafka has, topics that are
misnamed or missing, a changelog deleted under a running consumer."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import _kafka as k

pytestmark = pytest.mark.slow


def test_batches_of_every_codec_are_graded(kafka_bootstrap: str, tmp_path: Path) -> None:
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
        k.wait_for(
            lambda: len(k.finals(g)) >= len(expected) or g.proc.poll() is not None,
            60,
            "all verdicts",
        )
    finally:
        g.stop()
    assert "Traceback" not in g.err_path.read_text()
    assert k.finals(g) == expected
    rejected = [e for e in g.logs() if e.get("event") == "input_rejected"]
    assert [e["trace"] for e in rejected] == ["tomb"]
