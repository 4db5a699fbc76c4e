"""The stateful guard rules on a Kafka topic: a consumer process, killed
mid-stream and restarted from its saved state, gives the final verdicts of
batch grading on real recorded sessions."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import _kafka as k
from tests.graders._guard import recorded
from tests.graders.test_rules_modes import POLICY

from trajgrade import compile_suite, decode_config
from trajgrade.pipeline.whole import grade_bytes

pytestmark = pytest.mark.slow

SESSIONS = (
    "claude-code/spotter_v2.1.38_tool_heavy.jsonl",
    "codex/localpush_v0.104_redacted_118_calls.jsonl",
)


def _events() -> list[dict[str, Any]]:
    """The sessions' events, each closed by a trace_end (on a topic a
    trace ends by its end marker, not by the end of a file)."""
    out: list[dict[str, Any]] = []
    for name in SESSIONS:
        events = recorded(name)
        out.extend(msgspec.to_builtins(e) for e in events)
        out.extend(
            {"type": "trace_end", "trace_id": t}
            for t in dict.fromkeys(e.trace_id for e in events)
        )
    return out


def test_rules_on_a_topic_survive_a_kill_and_match_batch(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    policy = tmp_path / "rules.yaml"
    policy.write_text(POLICY)
    events = _events()
    data = b"".join(k.line(ev) + b"\n" for ev in events)
    batch = grade_bytes(compile_suite(decode_config(POLICY)), data)
    expected = {v.id: msgspec.to_builtins(v) for v in batch.verdicts if v.final}
    assert any(v["outcome"] == "fail" for v in expected.values())
    topic, group = k.unique("rules"), k.unique("g")
    k.create_topic(kafka_bootstrap, topic, 2)
    half = len(events) // 2
    args = ["--kafka-bootstrap", kafka_bootstrap, "--topic", topic, "--group", group]
    first = k.Grader(tmp_path, "first", args, config=policy)
    try:
        k.produce(kafka_bootstrap, topic, k.keyed(events[:half]))
        k.wait_for(
            lambda: k.committed(kafka_bootstrap, group, topic, 2) == half,
            30,
            "the first half to be committed",
        )
    finally:
        first.stop(signal.SIGKILL)
    second = k.Grader(tmp_path, "second", args, config=policy)
    try:
        k.produce(kafka_bootstrap, topic, k.keyed(events[half:]))
        k.wait_for(
            lambda: set(k.finals(first, second)) >= set(expected),
            60,
            "all final verdicts",
        )
    finally:
        second.stop()
    got = k.finals(first, second)
    assert {i: got[i] for i in expected} == expected
    restored = [e for e in second.logs() if e.get("event") == "partitions_assigned"]
    assert restored and restored[-1]["restored_traces"] > 0
