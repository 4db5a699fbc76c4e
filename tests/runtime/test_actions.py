"""On-fail actions (--fail-fast, --on-fail, --signal) and the on_fail: marking."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import structlog
from structlog.testing import capture_logs

from trajgrade import ConfigError, OnFail, compile_suite, decode_config
from trajgrade.cli.action_options import parse_signal_target
from trajgrade.runtime.actions import ActionOptions, Actions
from trajgrade.verdicts import Outcome, Verdict, verdict_id

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    """anyio runs on asyncio (aiokafka needs it)."""
    return "asyncio"


def _suite(text: str):
    return compile_suite(decode_config(textwrap.dedent(text), name="p.yaml"))


def _verdict(
    trace: str, grader: str = "g", outcome: Outcome = Outcome.FAIL, *, final=True
) -> Verdict:
    return Verdict(
        id=verdict_id(trace, grader, final=final),
        trace_id=trace,
        grader=grader,
        kind="tool-calls",
        outcome=outcome,
        score=0.0,
        final=final,
        evidence=f"{grader} failed on {trace}",
    )


def _gone(pid: int, within: float = 10.0) -> bool:
    """Whether process ``pid`` disappears within ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False


def _names(directory: Path, pattern: str) -> list[str]:
    """Sorted names of the files in ``directory`` matching ``pattern``."""
    return sorted(p.name for p in directory.glob(pattern))


# ------------------------------------------------------------------ marking
def test_on_fail_defaults_by_grader_type() -> None:
    """Budgets default to abort, every other grader type to deny."""
    suite = _suite(
        """\
        graders:
          - type: tool-calls
            config: {disallowed: [rm]}
          - type: token-budget
            config: {max: 10}
        """
    )
    assert suite.on_fail == {"tool-calls": OnFail.DENY, "token-budget": OnFail.ABORT}
    assert [g.on_fail for g in suite.graders] == [OnFail.DENY, OnFail.ABORT]


@pytest.mark.parametrize(
    "text",
    [
        "graders:\n  - {type: tool-calls, on_fail: report, config: {disallowed: [rm]}}\n",
        "graders:\n  - {type: tool-calls, on_fail: report, disallowed: [rm]}\n",
        "graders:\n  g: {kind: tool, function: contains, on_fail: report}\n",
        "execution:\n  evaluators:\n    - {name: g, type: tool_trajectory, mode: in_order, expected: [{tool: a}], on_fail: report}\n",
        "scorers:\n  - {type: function_call_coverage, function_calls: '[]', on_fail: report}\n",
    ],
    ids=["trajgrade", "trajgrade-inline", "letta", "agentv", "aigo"],
)
def test_on_fail_is_accepted_in_every_layout(text: str) -> None:
    """Every config layout takes on_fail: in the grader entry itself."""
    suite = compile_suite(decode_config(text, name="p.yaml"))
    assert list(suite.on_fail.values()) == [OnFail.REPORT]


def test_on_fail_does_not_change_the_fingerprint() -> None:
    """Changing on_fail keeps checkpoints valid: it is not grader state."""
    plain = _suite("graders:\n  - {type: tool-calls, config: {disallowed: [rm]}}\n")
    marked = _suite(
        "graders:\n  - {type: tool-calls, on_fail: abort, config: {disallowed: [rm]}}\n"
    )
    assert plain.fingerprint == marked.fingerprint
    assert marked.on_fail == {"tool-calls": OnFail.ABORT}


def test_a_bad_on_fail_is_a_located_config_error() -> None:
    """An unknown on_fail value names the file, line, field and the choices."""
    text = "graders:\n  - type: tool-calls\n    on_fail: kill\n    config: {disallowed: [rm]}\n"
    with pytest.raises(ConfigError) as caught:
        compile_suite(decode_config(text, name="p.yaml"))
    assert str(caught.value) == (
        "p.yaml:3: graders[0].on_fail: `on_fail` must be one of abort, deny, report, warn, ask "
        "(got 'kill'); see docs/hooks.md"
    )


# ------------------------------------------------------------------ --signal parsing
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1234", (1234, signal.SIGTERM)),
        ("1234:INT", (1234, signal.SIGINT)),
        ("1234:sigusr1", (1234, signal.SIGUSR1)),
        ("1234:9", (1234, signal.SIGKILL)),
    ],
)
def test_parse_signal_target(text: str, expected: tuple[int, int]) -> None:
    """PID[:SIGNAL] takes names with or without SIG, any case, or numbers."""
    assert parse_signal_target(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0", "positive process id"),
        ("abc", "positive process id"),
        ("12:NOPE", "unknown signal 'NOPE'"),
    ],
)
def test_parse_signal_target_rejects_bad_input(text: str, message: str) -> None:
    """Bad --signal values are refused with what to write instead."""
    with pytest.raises(ValueError, match=message):
        parse_signal_target(text)


# ------------------------------------------------------------------ --fail-fast
def test_fail_fast_trips_on_a_fail_but_not_on_error_or_report() -> None:
    """error outcomes and graders marked report never stop the run."""
    marks = {"loud": OnFail.DENY, "quiet": OnFail.REPORT}
    actions = Actions(
        ActionOptions(fail_fast=True), structlog.get_logger(), marks=marks
    )
    actions.observe([_verdict("t1", "loud", Outcome.ERROR)])
    actions.observe([_verdict("t1", "quiet")])
    assert not actions.stop_requested
    sealed = _verdict("t2", "loud", final=False)
    actions.observe([_verdict("t2", "loud", Outcome.PASS), sealed])
    assert actions.stop_requested
    assert actions.stop_reason == sealed


# ------------------------------------------------------------------ --signal
@pytest.mark.slow
def test_signal_is_sent_once_to_a_real_process(tmp_path: Path) -> None:
    """The first fail signals the target; later fails do not signal again."""
    script = tmp_path / "target.py"
    got = tmp_path / "got"
    ready = tmp_path / "ready"
    script.write_text(
        textwrap.dedent(
            f"""\
            import signal, time, pathlib
            def on(sig, frame):
                with open({str(got)!r}, "a") as f:
                    f.write("usr1\\n")
            signal.signal(signal.SIGUSR1, on)
            pathlib.Path({str(ready)!r}).write_text("ok")
            time.sleep(30)
            """
        )
    )
    proc = subprocess.Popen([sys.executable, str(script)])
    try:
        deadline = time.monotonic() + 20
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        options = ActionOptions(signal_targets=[(proc.pid, int(signal.SIGUSR1))])
        actions = Actions(options, structlog.get_logger())
        with capture_logs() as logs:
            actions.observe([_verdict("t1")])
            actions.observe([_verdict("t2")])
        deadline = time.monotonic() + 10
        while not got.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)  # room for a (wrong) second signal to arrive
        assert got.read_text() == "usr1\n"
        assert [e["event"] for e in logs] == ["signal_sent"]
    finally:
        proc.kill()
        proc.wait(timeout=10)


@pytest.mark.slow
def test_signal_default_term_stops_a_sleeping_process() -> None:
    """Without :SIGNAL, --signal sends SIGTERM."""
    proc = subprocess.Popen(["sleep", "30"])
    try:
        actions = Actions(
            ActionOptions(signal_targets=[parse_signal_target(str(proc.pid))]),
            structlog.get_logger(),
        )
        actions.observe([_verdict("t1")])
        assert proc.wait(timeout=10) == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


@pytest.mark.slow
def test_signal_to_a_missing_process_is_logged_not_raised() -> None:
    """A target that is gone is an error log line; the run goes on."""
    proc = subprocess.Popen(["true"])
    proc.wait(timeout=10)
    actions = Actions(
        ActionOptions(signal_targets=[(proc.pid, int(signal.SIGTERM))]),
        structlog.get_logger(),
    )
    with capture_logs() as logs:
        actions.observe([_verdict("t1")])
    assert logs[0]["event"] == "signal_failed"
    assert logs[0]["pid"] == proc.pid


# ------------------------------------------------------------------ --on-fail
@pytest.mark.slow
async def test_on_fail_runs_once_per_failed_trace_with_the_verdict(
    tmp_path: Path,
) -> None:
    """One command per failed trace (fail or error), verdict JSON on stdin and in env."""
    import anyio

    cmd = f'cat > "{tmp_path}/$TRAJGRADE_TRACE_ID.json"; env | grep ^TRAJGRADE_ | sort > "{tmp_path}/$TRAJGRADE_TRACE_ID.env"'
    actions = Actions(
        ActionOptions(on_fail=cmd),
        structlog.get_logger(),
        marks={"g": OnFail.REPORT},
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(actions.serve)
        actions.observe([_verdict("t1"), _verdict("t1", "h"), _verdict("t2")])
        actions.observe([_verdict("t3", outcome=Outcome.PASS)])
        actions.observe([_verdict("t4", outcome=Outcome.ERROR), _verdict("t1")])
        await actions.drain(20)
    assert _names(tmp_path, "*.json") == [
        "t1.json",
        "t2.json",
        "t4.json",
    ]
    sent = json.loads((tmp_path / "t1.json").read_text())
    assert sent["grader"] == "g" and sent["outcome"] == "fail"
    env = (tmp_path / "t4.env").read_text().splitlines()
    assert "TRAJGRADE_OUTCOME=error" in env
    assert "TRAJGRADE_ON_FAIL=report" in env
    assert "TRAJGRADE_EVIDENCE=g failed on t4" in env
    assert f"TRAJGRADE_VERDICT_ID={verdict_id('t4', 'g', final=True)}" in env
    assert actions.commands_started == 3 and actions.commands_failed == 0


@pytest.mark.slow
async def test_on_fail_concurrency_is_bounded(tmp_path: Path) -> None:
    """No more than --on-fail-concurrency commands run at once."""
    import anyio

    log = tmp_path / "log"
    cmd = f'echo start >> "{log}"; sleep 0.3; echo end >> "{log}"'
    actions = Actions(
        ActionOptions(on_fail=cmd, on_fail_concurrency=2), structlog.get_logger()
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(actions.serve)
        actions.observe([_verdict(f"t{i}") for i in range(6)])
        await actions.drain(30)
    running = peak = 0
    for line in log.read_text().split():
        running += 1 if line == "start" else -1
        peak = max(peak, running)
    assert log.read_text().split().count("end") == 6
    assert peak == 2


@pytest.mark.slow
async def test_on_fail_timeout_kills_the_command_and_its_children(
    tmp_path: Path,
) -> None:
    """A command over --on-fail-timeout is killed with its process group, and logged."""
    import anyio

    pid_file = tmp_path / "child.pid"
    cmd = f'sleep 30 & echo $! > "{pid_file}"; wait; touch "{tmp_path}/late"'
    actions = Actions(
        ActionOptions(on_fail=cmd, on_fail_timeout=0.5), structlog.get_logger()
    )
    with capture_logs() as logs:
        async with anyio.create_task_group() as tg:
            tg.start_soon(actions.serve)
            actions.observe([_verdict("t1")])
            await actions.drain(20)
    child = int(pid_file.read_text())
    assert _gone(child)
    assert not (tmp_path / "late").exists()
    assert actions.commands_failed == 1
    assert [e["event"] for e in logs if e["event"].startswith("on_fail")] == [
        "on_fail_timeout"
    ]


@pytest.mark.slow
async def test_a_failing_on_fail_command_is_logged_and_the_rest_still_run(
    tmp_path: Path,
) -> None:
    """A non-zero exit is a warning; other traces' commands still run."""
    import anyio

    cmd = f'test "$TRAJGRADE_TRACE_ID" != t1 || exit 3; touch "{tmp_path}/$TRAJGRADE_TRACE_ID"'
    actions = Actions(ActionOptions(on_fail=cmd), structlog.get_logger())
    with capture_logs() as logs:
        async with anyio.create_task_group() as tg:
            tg.start_soon(actions.serve)
            actions.observe([_verdict("t1"), _verdict("t2")])
            await actions.drain(20)
    assert (tmp_path / "t2").exists() and not (tmp_path / "t1").exists()
    failed = [e for e in logs if e["event"] == "on_fail_failed"]
    assert [(e["trace"], e["exit_code"]) for e in failed] == [("t1", 3)]


@pytest.mark.slow
async def test_drain_without_serve_runs_the_queue_itself(tmp_path: Path) -> None:
    """If the runner's group ended before serve ran, drain still runs the commands."""
    actions = Actions(
        ActionOptions(on_fail=f'touch "{tmp_path}/$TRAJGRADE_TRACE_ID"'),
        structlog.get_logger(),
    )
    actions.observe([_verdict("t1"), _verdict("t2")])
    await actions.drain(20)
    assert _names(tmp_path, "*") == ["t1", "t2"]


@pytest.mark.slow
async def test_drain_timeout_kills_stragglers_and_drops_the_queue(
    tmp_path: Path,
) -> None:
    """Commands still busy when the drain time is up are killed; queued ones dropped."""
    import anyio

    pid_file = tmp_path / "pids"
    cmd = f'echo $$ >> "{pid_file}"; exec sleep 30'
    actions = Actions(
        ActionOptions(on_fail=cmd, on_fail_concurrency=1), structlog.get_logger()
    )
    with capture_logs() as logs:
        async with anyio.create_task_group() as tg:
            tg.start_soon(actions.serve)
            actions.observe([_verdict("t1"), _verdict("t2"), _verdict("t3")])
            await actions.drain(1.0)
    pids = [int(p) for p in pid_file.read_text().split()]
    assert len(pids) == 1 and _gone(pids[0])
    abandoned = [e for e in logs if e["event"] == "on_fail_abandoned"]
    assert abandoned and abandoned[0]["running"] == 1 and abandoned[0]["queued"] == 2
    assert actions.commands_dropped == 2


@pytest.mark.slow
async def test_a_command_that_cannot_start_is_logged(tmp_path: Path) -> None:
    """An --on-fail command the shell cannot run fails that trace's action only."""
    import anyio

    actions = Actions(
        ActionOptions(on_fail=str(tmp_path / "no-such-command")),
        structlog.get_logger(),
    )
    with capture_logs() as logs:
        async with anyio.create_task_group() as tg:
            tg.start_soon(actions.serve)
            actions.observe([_verdict("t1")])
            await actions.drain(20)
    failed = [e for e in logs if e["event"] == "on_fail_failed"]
    assert failed and failed[0]["exit_code"] == 127
