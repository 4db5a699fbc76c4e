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
