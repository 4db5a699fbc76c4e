"""On-fail actions on ``trajgrade grade`` (batch, follow): real commands, real processes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parents[1] / "src" / "trajgrade" / "examples"
POLICY = str(EXAMPLES / "policy.yaml")
SESSION = str(EXAMPLES / "session.jsonl")


def grade(*args: str, **kw: object) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "trajgrade", "grade", "-q", "--output", "jsonl", *args],
        capture_output=True,
        timeout=60,
        check=False,
        **kw,  # type: ignore[arg-type]
    )


@pytest.mark.slow
def test_on_fail_runs_once_per_failed_trace_with_the_verdict(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    cmd = f'cat > {out}/"$TRAJGRADE_TRACE_ID".json; echo "$TRAJGRADE_GRADER" > {out}/"$TRAJGRADE_TRACE_ID".grader'
    p = grade("-c", POLICY, "--on-fail", cmd, SESSION)
    assert p.returncode == 1, p.stderr.decode()
    assert sorted(f.name for f in out.iterdir()) == [
        "leaky-agent.grader",
        "leaky-agent.json",
    ]
    verdict = json.loads((out / "leaky-agent.json").read_text())
    assert (verdict["trace_id"], verdict["outcome"]) == ("leaky-agent", "fail")
    assert (out / "leaky-agent.grader").read_text().strip() == "safe-and-tested"


@pytest.mark.slow
def test_fail_fast_stops_reading_at_the_first_fail(tmp_path: Path) -> None:
    # Two copies of the session as separate inputs: the second is never read.
    second = tmp_path / "later.jsonl"
    second.write_text(Path(SESSION).read_text().replace("fix-timeout", "later"))
    p = grade("-c", POLICY, "--fail-fast", SESSION, str(second))
    assert p.returncode == 1
    traces = {json.loads(line)["trace_id"] for line in p.stdout.splitlines()}
    assert "later" not in traces
    assert "leaky-agent" in traces


@pytest.mark.slow
def test_signal_reaches_a_process_at_the_first_fail(tmp_path: Path) -> None:
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        p = grade("-c", POLICY, "--signal", f"{victim.pid}:TERM", SESSION)
        assert p.returncode == 1
        deadline = time.monotonic() + 10
        while victim.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert victim.returncode == -15
    finally:
        victim.kill()
        victim.wait()
