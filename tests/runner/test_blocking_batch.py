"""A plain batch ``grade`` of regular files runs without an event loop
(:mod:`trajgrade.runner.batch`): it imports no asyncio, anyio or ssl, and
gives the async runner's stdout, byte for byte, and its exit status.

``TRAJGRADE_ASYNC_BATCH=1`` sends the same run to the async runner: each
comparison runs the real entry point twice, once per driver.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
EXAMPLE_POLICY = ROOT / "src" / "trajgrade" / "examples" / "policy.yaml"
EXAMPLE_SESSION = ROOT / "src" / "trajgrade" / "examples" / "session.jsonl"

#: The modules a plain batch run must not load: the event loop and TLS,
#: the async runner, and the other commands (cli.main imports a command's
#: module when it runs).
WATCHED = (
    "asyncio",
    "structlog",
    "anyio",
    "ssl",
    "trajgrade.runner.run",
    "trajgrade.cli.hooks",
    "trajgrade.cli.run",
    "trajgrade.cli.init",
    "trajgrade.wrapper",
)

#: The entry point, then the modules it left loaded (stdout stays the run's).
_PROBE = f"""
import json, sys
WATCHED = {WATCHED!r}
sys.argv = ["trajgrade", *sys.argv[1:]]
from trajgrade._entry import main
try:
    main()
finally:
    loaded = [m for m in WATCHED if m in sys.modules]
    sys.stderr.write("\\nLOADED " + json.dumps(loaded) + "\\n")
"""

#: Recorded sessions of several formats (regular files, some gzipped).
SESSIONS = (
    "claude-code/spotter_v2.1.38_tool_heavy.jsonl",
    "claude-code/codemie_v2.1.4_interrupted.jsonl",
    "codex/localpush_v0.104_redacted_118_calls.jsonl",
    "codex/agentcmd_v0.40.0_shell_16_calls.jsonl.gz",
    "otel/interleaved.jsonl",
    "otel/malformed.jsonl",
    "openai-chat/tau-bench_gpt-4o_airline_subset.json.gz",
    "atif/harbor_terminus2_v1.5_linear_history.json",
)

#: Fails every trace that calls a tool or spends tokens.
FAILING_POLICY = """\
graders:
  - type: tool-calls
    name: nothing-at-all
    config:
      disallowed:
        - name: "."
  - type: token-budget
    config: {max: 1}
"""


def _grade(*args: str, async_batch: bool = False) -> tuple[int, str, list[str]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env.pop("TRAJGRADE_ASYNC_BATCH", None)
    if async_batch:
        env["TRAJGRADE_ASYNC_BATCH"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, "grade", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
        timeout=120,
    )
    marker = done.stderr.rindex("\nLOADED ")
    loaded = json.loads(done.stderr[marker + len("\nLOADED ") :])
    return done.returncode, done.stdout, loaded


def test_a_plain_grade_of_a_file_starts_no_event_loop() -> None:
    """A failing run of the example (its leaky agent fails)."""
    code, out, loaded = _grade("-q", "-c", str(EXAMPLE_POLICY), str(EXAMPLE_SESSION))
    assert code == 1  # (the example's leaky agent fails)
    assert '"outcome":"fail"' in out
    assert "asyncio" not in loaded
    assert "anyio" not in loaded
    assert "trajgrade.runner.run" not in loaded
    assert not {"trajgrade.cli.hooks", "trajgrade.cli.run"} & set(loaded)


def test_a_plain_grade_that_logs_imports_no_event_loop(tmp_path: Path) -> None:
    """Without ``-q`` the run logs its summary (and an anomaly) as JSON lines:
    written without structlog, which imports asyncio and ssl at its top."""
    policy = tmp_path / "budget.json"
    policy.write_text('{"graders": [{"type": "tool-call-count", "max": 5}]}')
    session = tmp_path / "one.jsonl"
    session.write_text('{"type":"tool_call","trace_id":"t","name":"x","call_id":"1"}\n')
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, "grade", "-c", str(policy), str(session)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    marker = done.stderr.rindex("\nLOADED ")
    lines = [json.loads(x) for x in done.stderr[:marker].splitlines() if x]
    assert [x["event"] for x in lines] == ["calls_unanswered", "run_finished"]
    assert json.loads(done.stderr[marker + len("\nLOADED ") :]) == []


def test_a_passing_plain_grade_imports_no_ssl(tmp_path: Path) -> None:
    """(A failing verdict's evidence is redacted by detect-secrets, whose
    plug-ins import requests and so ssl: that is the suite's need.)"""
    policy = tmp_path / "budget.yaml"
    policy.write_text(
        "graders:\n  - name: budget\n    type: token-budget\n    max: 1000000\n"
    )
    code, out, loaded = _grade("-q", "-c", str(policy), str(EXAMPLE_SESSION))
    assert code == 0, out
    assert loaded == []


def test_a_run_the_event_loop_serves_still_gets_it(tmp_path: Path) -> None:
    """A name that is no regular file goes to the async runner, as before."""
    code, _, loaded = _grade("-c", str(EXAMPLE_POLICY), str(tmp_path / "missing.jsonl"))
    assert code != 0
    assert "anyio" in loaded  # (a missing file: the async runner reports it)


def test_a_followed_file_is_still_graded_by_the_event_loop(tmp_path: Path) -> None:
    """``--follow`` keeps the async runner: the lines appended after it
    started are graded (an early fail on stdout), and it stops on SIGINT."""
    import signal

    log = tmp_path / "live.jsonl"
    log.write_bytes(b"")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env.pop("TRAJGRADE_ASYNC_BATCH", None)
    argv = ["grade", "-q", "--follow", "-c", str(EXAMPLE_POLICY), str(log)]
    proc = subprocess.Popen(
        [sys.executable, "-c", _PROBE, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert proc.stdout is not None
        with log.open("ab") as f:  # (the file was empty: these lines are new)
            f.write(EXAMPLE_SESSION.read_bytes())
        first = proc.stdout.readline()  # blocks until a verdict is decided
        assert '"outcome":"fail"' in first
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    loaded = json.loads(err[err.rindex("\nLOADED ") + len("\nLOADED ") :])
    assert "anyio" in loaded
    assert "trajgrade.runner.run" in loaded


@pytest.mark.parametrize("policy_name", ["example", "failing"])
def test_both_drivers_write_the_same_bytes_and_exit_alike(
    tmp_path: Path, policy_name: str
) -> None:
    if policy_name == "example":
        policy = EXAMPLE_POLICY
    else:
        policy = tmp_path / "failing.yaml"
        policy.write_text(FAILING_POLICY)
    inputs = [str(FIXTURES / name) for name in SESSIONS]
    for args in (
        ["-c", str(policy), *inputs],
        ["-c", str(policy), "--output", "pretty", *inputs[:3]],
    ):
        code, out, loaded = _grade(*args)
        async_code, async_out, async_loaded = _grade(*args, async_batch=True)
        assert "trajgrade.runner.run" not in loaded
        assert (
            "trajgrade.runner.run" in async_loaded
        )  # (the comparison compares two drivers)
        assert out == async_out
        assert code == async_code
    assert out.strip()


@pytest.mark.slow
def test_ctrl_c_stops_a_blocking_run_between_chunks(tmp_path: Path) -> None:
    """SIGINT during a long file: reading stops, the open traces are closed
    as at end of input, and the summary says interrupted (as the async run)."""
    import signal
    import time

    big = tmp_path / "big.jsonl"
    with big.open("w") as f:
        for t in range(20_000):  # ~12 MB: many 1 MiB chunks
            f.write(json.dumps({"type": "turn_start", "trace_id": f"t{t}"}) + "\n")
            call = {"type": "tool_call", "trace_id": f"t{t}", "name": "bash"}
            f.write(json.dumps({**call, "call_id": "1", "args": {"command": "ls"}}))
            f.write(
                "\n" + json.dumps({"type": "trace_end", "trace_id": f"t{t}"}) + "\n"
            )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env.pop("TRAJGRADE_ASYNC_BATCH", None)
    proc = subprocess.Popen(
        [sys.executable, "-c", _PROBE, "grade", "-c", str(EXAMPLE_POLICY), str(big)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    assert proc.stdout is not None
    proc.stdout.readline()  # the first chunk was graded
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1  # (calls without results fail the policy)
    assert '"event":"shutdown_requested"' in err
    assert '"interrupted":true' in err
    assert len(out.splitlines()) < 20_000 * 4 - 1  # not every trace was read
    assert "trajgrade.runner.run" not in err[err.rindex("LOADED") :]
