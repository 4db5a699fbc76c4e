"""A retried export is graded once: OTLP clients retry a request whose
answer they did not get (a timeout while trajgrade's queue was long, a
dropped connection), and the same events counted twice would fail a count
or a budget that the agent kept."""

from __future__ import annotations

import gzip
from typing import TYPE_CHECKING

import pytest
from tests._http import post, raw_request
from tests.telemetry._grade import Grader
from tests.telemetry._otlp import bodies

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.slow

POLICY = """graders:
  - type: tool-call-count
    name: calls
    config: {max: 3}
"""


def _send(port: int, path: str, ctype: str, body: bytes, **headers: str) -> int:
    hdrs = {"Content-Type": ctype, "Content-Length": str(len(body)), **headers}
    return raw_request(port, post(path, body, hdrs))[0]


def test_a_retried_batch_is_graded_once(tmp_path: Path) -> None:
    """The recorded Claude Code session's first batch (3 tool calls) sent
    three times (the retries gzip'd, as an exporter may): 3 calls, a pass;
    its second batch then makes 4, a fail."""
    policy = tmp_path / "p.yaml"
    policy.write_text(POLICY)
    first, second = bodies("claude-code", "http-protobuf")
    g = Grader(policy)
    try:
        assert _send(g.port, *first) == 200
        assert _send(g.port, *first) == 200
        path, ctype, body = first
        assert (
            _send(
                g.port, path, ctype, gzip.compress(body), **{"Content-Encoding": "gzip"}
            )
            == 200
        )
        assert g.stop() == 0
        [v] = [v for v in g.rest() if v["final"]]
        assert v["outcome"] == "pass", v
        assert "3 tool calls" in v["evidence"], v
        assert any(r.get("event") == "otlp_duplicate_skipped" for r in g.log)
    finally:
        g.stop()
    g = Grader(policy)
    try:
        assert _send(g.port, *first) == 200
        assert _send(g.port, *second) == 200
        assert g.stop() == 1
    finally:
        g.stop()
