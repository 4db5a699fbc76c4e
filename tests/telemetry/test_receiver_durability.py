"""``grade --otlp --state`` killed with SIGKILL forgets nothing it answered
200 (issue 35: 65 of 600 answered events were lost): each request is
journaled in the state directory before its answer, and a restart grades
the journaled requests the last checkpoint does not hold."""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING

import pytest
from tests._http import post, raw_request
from tests.telemetry._grade import Grader
from tests.telemetry._otlp import bodies

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.slow

POLICY = "graders:\n  - type: tool-call-count\n    name: calls\n    config: {max: 3}\n"


def _send(port: int, path: str, ctype: str, body: bytes) -> int:
    hdrs = {"Content-Type": ctype, "Content-Length": str(len(body))}
    return raw_request(port, post(path, body, hdrs))[0]


def test_sigkill_after_a_200_loses_nothing_answered(tmp_path: Path) -> None:
    """The first batch (3 calls) is answered 200, then the run is killed
    with SIGKILL before any checkpoint (an hour apart). Restarted on its
    state, the second batch's call is the 4th: the budget fails."""
    policy = tmp_path / "p.yaml"
    policy.write_text(POLICY)
    first, second = bodies("claude-code", "http-protobuf")
    state = str(tmp_path / "state")
    hour = ("--state", state, "--checkpoint-interval", "3600")
    g = Grader(policy, *hour)
    assert _send(g.port, *first) == 200
    os.kill(g.proc.pid, signal.SIGKILL)
    assert g.stop() == -signal.SIGKILL
    assert g.rest() == []
    g = Grader(policy, *hour)
    try:
        assert _send(g.port, *second) == 200
        [v] = g.wait_for(1, timeout=30)
        assert (v["grader"], v["outcome"]) == ("calls", "fail")
        assert "4 tool calls" in v["evidence"]
    finally:
        g.stop()
    assert any(r.get("event") == "otlp_journal_replayed" for r in g.log)


def test_a_checkpoint_drops_the_journal_it_holds(tmp_path: Path) -> None:
    """Once a checkpoint holds the answered requests, their journal
    segments are gone: a restart does not grade them twice."""
    policy = tmp_path / "p.yaml"
    policy.write_text(POLICY)
    first, second = bodies("claude-code", "http-protobuf")
    state = tmp_path / "state"
    g = Grader(policy, "--state", str(state), "--checkpoint-interval", "3600")
    assert _send(g.port, *first) == 200
    assert g.stop() == 0  # SIGINT: a last checkpoint
    assert [p.name for p in state.glob("otlp.journal.*")] == []
    g = Grader(policy, "--state", str(state))
    try:
        assert _send(g.port, *second) == 200
        [v] = g.wait_for(1, timeout=30)
        assert "4 tool calls" in v["evidence"]  # not 7: the first batch once
    finally:
        g.stop()
    assert not any(r.get("event") == "otlp_journal_replayed" for r in g.log)
