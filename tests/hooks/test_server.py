"""``trajgrade serve`` answers hook calls over loopback HTTP, and the thin client forwards."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from tests.hooks._replay import POLICY, payloads, read_verdicts, run_hook
from tests.hooks._serve import serving

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.slow


@pytest.fixture(name="server")
def server_fixture(tmp_path: Path) -> Iterator[tuple[str, Path, subprocess.Popen[str]]]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    with serving(
        policy,
        tmp_path / "state",
        "--verdicts",
        str(tmp_path / "v.jsonl"),
        stderr=subprocess.PIPE,
    ) as (url, proc):
        yield url, tmp_path, proc


def _post(url: str, agent: str, payload: dict[str, object]) -> tuple[int, str]:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request("POST", f"/hook/{agent}", body=json.dumps(payload))
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


def test_http_hook_denies_and_grades(
    server: tuple[str, Path, subprocess.Popen[str]],
) -> None:
    """Claude Code http hook calls: the disallowed call is denied, the session graded."""
    url, tmp, _ = server
    answers = [
        (p["hook_event_name"], _post(url, "claude-code", p))
        for p in payloads("claude-code")
    ]
    assert all(status == 200 for _, (status, _) in answers)
    denied = [
        json.loads(body) for e, (_, body) in answers if e == "PreToolUse" and body
    ]
    assert len(denied) == 1
    assert denied[0]["hookSpecificOutput"]["permissionDecision"] == "deny"
    finals = {
        v["grader"]: v["outcome"] for v in read_verdicts(tmp / "v.jsonl") if v["final"]
    }
    assert finals["no-hostname"] == "fail"
    assert finals["turn-count"] == "pass"


def test_thin_client_forwards(server: tuple[str, Path, subprocess.Popen[str]]) -> None:
    """`trajgrade hook codex --server URL` prints the daemon's answer."""
    url, _, _ = server
    outs = [run_hook("codex", p, "--server", url) for p in payloads("codex")]
    assert all(o.returncode == 0 for o in outs), [o.stderr for o in outs]
    denied = [json.loads(o.stdout) for o in outs if o.stdout]
    assert len(denied) == 1
    assert "no-hostname" in denied[0]["hookSpecificOutput"]["permissionDecisionReason"]


def test_state_is_checkpointed_at_shutdown(
    server: tuple[str, Path, subprocess.Popen[str]],
) -> None:
    """SIGTERM writes the open sessions' state in the cold path's format."""
    url, tmp, proc = server
    for p in payloads("gemini")[:3]:
        assert _post(url, "gemini", p)[0] == 200
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
    assert len(list((tmp / "state" / "gemini").glob("*.state"))) == 1
    # The cold path goes on from the checkpoint: the 2nd call is still denied.
    rest = payloads("gemini")[3:]
    policy = tmp / "policy.yaml"
    outs = [
        run_hook("gemini", p, "-c", policy, "--state-dir", tmp / "state") for p in rest
    ]
    denied = [json.loads(o.stdout) for o in outs if o.stdout]
    assert [d["decision"] for d in denied] == ["deny"]


def test_unreachable_server_fails_open_or_closed(tmp_path: Path) -> None:
    """No daemon: fail-open prints nothing; --fail-closed denies the call."""
    pre = payloads("claude-code")[2]
    url = "http://127.0.0.1:9"  # discard port: nothing listens
    open_ = run_hook("claude-code", pre, "--server", url)
    assert (open_.returncode, open_.stdout) == (0, "")
    assert "trajgrade serve" in open_.stderr
    closed = run_hook("claude-code", pre, "--server", url, "--fail-closed")
    assert (
        json.loads(closed.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    )
