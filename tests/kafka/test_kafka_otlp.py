"""Agents → OpenTelemetry Collector → Kafka → trajgrade: records shaped as
the Collector's Kafka exporter writes them (one ``ExportLogsServiceRequest``
per record, ``otlp_proto`` or ``otlp_json``), on the real tansu broker."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import _kafka as k
from tests.telemetry._otlp import bodies

from trajgrade.telemetry.codec import decode

pytestmark = pytest.mark.slow

POLICY = """graders:
  - type: tool-calls
    name: no-notes
    config:
      disallowed:
        - {name: "^Write$"}
  - type: token-budget
    name: tokens
    config: {max: 300}
"""


def _claude_records(encoding: str) -> list[bytes]:
    """The recorded Claude Code export, as the Collector's exporter would
    write it: protobuf batches as sent, or their OTLP/JSON form."""
    if encoding == "otlp_proto":
        return [body for _, _, body in bodies("claude-code", "http-protobuf")]
    return [decode(p, b, ct).line for p, ct, b in bodies("claude-code", "http-json")]


@pytest.mark.parametrize("encoding", ["otlp_proto", "otlp_json"])
def test_collector_records_are_graded(
    kafka_bootstrap: str, tmp_path: Path, encoding: str
) -> None:
    topic = k.unique("otlp-logs")
    k.create_topic(kafka_bootstrap, topic, 1)
    garbage = (
        b"\x0a\xff\xff\xff" if encoding == "otlp_proto" else b'{"resourceLogs": 1}'
    )
    values = [garbage, *_claude_records(encoding)]
    k.produce(kafka_bootstrap, topic, [(None, v, None) for v in values])
    policy = tmp_path / "p.yaml"
    policy.write_text(POLICY)
    g = k.Grader(
        tmp_path,
        "otlp",
        [
            "--kafka-bootstrap",
            kafka_bootstrap,
            "--topic",
            topic,
            "--group",
            k.unique("g"),
            "--kafka-encoding",
            encoding,
        ],
        config=policy,
    )
    try:
        k.wait_for(
            lambda: (
                {
                    v["grader"]
                    for v in g.verdicts()
                    if v["final"] and v["outcome"] == "fail"
                }
                == {"no-notes", "tokens"}
            ),
            60,
            "both live fails",
        )
    finally:
        g.stop()
    fails = [v for v in g.verdicts() if v["final"]]
    assert all(v["early"] for v in fails)
    assert len({v["trace_id"] for v in fails}) == 1  # the session id
    rejected = [x for x in g.logs() if "not an OTLP payload" in json.dumps(x)]
    assert len(rejected) == 1
    assert rejected[0].get("offset") == 0


def test_verdicts_reach_the_verdicts_topic_and_the_otlp_collector(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """`--verdicts-topic` with `--export-otlp` on a Kafka run: every verdict
    and guard decision goes to both, the same ones, and the final verdicts
    are those of batch grading the same events."""
    from tests.telemetry._grade import OtlpSink

    topic, out = k.unique("both-in"), k.unique("both-verdicts")
    k.create_topic(kafka_bootstrap, topic, 2)
    events = k.corpus(2)
    k.produce(kafka_bootstrap, topic, k.keyed(events))
    expected = k.reference(events)
    sink = OtlpSink()
    g = k.Grader(
        tmp_path,
        "both",
        [
            *("--kafka-bootstrap", kafka_bootstrap, "--topic", topic),
            *("--group", k.unique("g"), "--verdicts-topic", out),
            *("--export-otlp", sink.url, "--export-decisions"),
        ],
    )

    def exported(final: bool | None = None) -> set[str]:
        return {
            r["attributes"]["trajgrade.verdict.id"]
            for r in sink.records()
            if "trajgrade.verdict.id" in r["attributes"]
            and final in (None, r["attributes"]["trajgrade.verdict.final"])
        }

    def on_topic() -> list[dict[str, object]]:
        records = k.read_topic(kafka_bootstrap, out, 10_000, timeout=1)
        return [{"header": r.headers[0][0], **json.loads(r.value)} for r in records]

    try:
        k.wait_for(
            lambda: (
                sum(v.get("final") is True for v in on_topic()) >= len(expected)
                and len(exported(final=True)) >= len(expected)
            ),
            60,
            "final verdicts on the topic and at the collector",
        )
    finally:
        code = g.stop()
        sink.close()  # (the exporter flushes when the run stops)
    assert code == 1, g.err_path.read_text()  # the leaky agent fails
    assert g.verdicts() == []  # with a verdicts topic, nothing on stdout
    records = on_topic()
    verdicts = [r for r in records if r["header"] == "verdict-id"]
    decisions = [r for r in records if r["header"] == "decision-id"]
    assert {str(v["id"]) for v in verdicts if v["final"]} == set(expected)
    assert {str(v["id"]) for v in verdicts} == exported()
    assert exported(final=True) == set(expected)
    # The guard's decisions (a .env read per copy) went to both as well.
    otlp_decisions = [
        r["attributes"]
        for r in sink.records()
        if "trajgrade.guard.rule" in r["attributes"]
    ]
    assert len(decisions) == len(otlp_decisions) == 2
    assert sorted(str(d["trace_id"]) for d in decisions) == sorted(
        str(a["trajgrade.trace_id"]) for a in otlp_decisions
    )
