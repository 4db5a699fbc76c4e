"""Recorded hook calls replayed as real ``trajgrade hook`` processes."""

from __future__ import annotations

import json
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import msgspec
import pytest
from tests.hooks._replay import (
    FIXTURES,
    POLICY,
    RECORDED,
    finals,
    hook_cmd,
    payloads,
    read_verdicts,
    run_hook,
)

from trajgrade import compile_suite, decode_config, grade_bytes
from trajgrade._util.sealed import unseal
from trajgrade.hooks.session import SessionState

pytestmark = pytest.mark.slow


@pytest.fixture(name="policy")
def policy_fixture(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return path


@pytest.mark.parametrize("agent", ["claude-code", "codex", "gemini"])
def test_replayed_session_grades_like_its_transcript(
    agent: str, policy: Path, tmp_path: Path
) -> None:
    """Final verdicts of the hook calls equal batch grading of the recorded transcript."""
    folder, name = RECORDED[agent]
    transcript = tmp_path / name
    shutil.copy(FIXTURES / folder / name, transcript)
    verdicts = tmp_path / "verdicts.jsonl"
    answers: dict[str, list[str]] = {}
    for p in payloads(agent, transcript):
        proc = run_hook(
            agent,
            p,
            "-c",
            policy,
            "--state-dir",
            tmp_path / "state",
            "--verdicts",
            verdicts,
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr == ""
        answers.setdefault(p["hook_event_name"], []).append(proc.stdout)
    gate = "BeforeTool" if agent == "gemini" else "PreToolUse"
    decided = [json.loads(a) for a in answers[gate] if a]
    assert len(decided) == 1  # only `cat /etc/hostname` is refused
    assert "no-hostname" in json.dumps(decided[0])
    suite = compile_suite(decode_config(POLICY, name="policy.yaml"))
    batch = grade_bytes(suite, transcript.read_bytes(), source=str(transcript))
    expected = {v.grader: (str(v.outcome), v.score) for v in batch.verdicts if v.final}
    # The hook is a guard mode: its built-in self-protection judged too.
    expected["protect"] = ("pass", 1.0)
    assert finals(read_verdicts(verdicts)) == expected
    assert expected["no-hostname"][0] == "fail"
    # SessionEnd keeps the state, marked ended (a forged end erases nothing).
    kept = list((tmp_path / "state" / agent).glob("*.state"))
    assert [
        msgspec.msgpack.decode(unseal(p.read_bytes()), type=SessionState).ended
        for p in kept
    ] == [True]


def test_twenty_concurrent_pre_tool_use_lose_no_update(
    policy: Path, tmp_path: Path
) -> None:
    """20 PreToolUse processes of one session at once: every call is counted."""
    base = payloads("claude-code")
    pre = next(p for p in base if p["hook_event_name"] == "PreToolUse")
    state = tmp_path / "state"
    verdicts = tmp_path / "v.jsonl"
    args = ("-c", policy, "--state-dir", state, "--verdicts", verdicts)
    assert run_hook("claude-code", base[0], *args).returncode == 0

    def one(i: int) -> subprocess.CompletedProcess[str]:
        p = {
            **pre,
            "tool_use_id": f"toolu_parallel_{i}",
            "tool_input": {"command": f"echo {i}"},
        }
        return run_hook("claude-code", p, *args)

    with ThreadPoolExecutor(20) as pool:
        procs = list(pool.map(one, range(20)))
    assert all(p.returncode == 0 and p.stdout == "" for p in procs), [
        p.stderr for p in procs
    ]
    end = next(p for p in base if p["hook_event_name"] == "SessionEnd")
    assert run_hook("claude-code", end, *args).returncode == 0
    got = finals(read_verdicts(verdicts))
    assert got["tool-call-count"] == ("pass", 1.0)
    count = next(v for v in read_verdicts(verdicts) if v["grader"] == "tool-call-count")
    assert count["metadata"]["value"] == 20


def test_budget_stops_the_run(tmp_path: Path) -> None:
    """A blown budget answers continue:false (Claude Code), a deny (Codex), continue:false (Gemini)."""
    policy = tmp_path / "p.yaml"
    policy.write_text("graders:\n  - type: tool-call-count\n    config: {max: 1}\n")
    for agent, gate in (
        ("claude-code", "PreToolUse"),
        ("codex", "PreToolUse"),
        ("gemini", "BeforeTool"),
    ):
        out = []
        for p in payloads(agent):
            proc = run_hook(agent, p, "-c", policy, "--state-dir", tmp_path / "s")
            assert proc.returncode == 0, proc.stderr
            out.append(
                (p["hook_event_name"], json.loads(proc.stdout) if proc.stdout else None)
            )
        gates = [a for e, a in out if e == gate]
        assert gates[0] is None  # the first call is within budget
        second = gates[1]
        assert second is not None
        if agent == "codex":
            assert second["hookSpecificOutput"]["permissionDecision"] == "deny"
            assert (
                "tool-call-count"
                in second["hookSpecificOutput"]["permissionDecisionReason"]
            )
            assert all(a is None or "continue" not in a for _, a in out)
        else:
            assert second["continue"] is False
            assert "tool-call-count" in second["stopReason"]


def test_broken_config_fails_open_and_says_so(tmp_path: Path) -> None:
    """A broken policy lets calls through, logs it, and tells the user at SessionStart."""
    policy = tmp_path / "bad.yaml"
    policy.write_text("graders:\n  - type: no-such-grader\n")
    start, pre = payloads("claude-code")[0], payloads("claude-code")[2]
    proc = run_hook("claude-code", start, "-c", policy, "--state-dir", tmp_path / "s")
    assert proc.returncode == 0
    assert "no-such-grader" in json.loads(proc.stdout)["systemMessage"]
    proc = run_hook("claude-code", pre, "-c", policy, "--state-dir", tmp_path / "s")
    assert (proc.returncode, proc.stdout) == (0, "")
    assert "invalid config" in proc.stderr
    # once on stderr, readable; the JSON record goes to the log file only
    assert proc.stderr.count("no-such-grader") == 1, proc.stderr
    assert "no-such-grader" in (tmp_path / "s" / "hooks.log").read_text()


def test_broken_config_fail_closed_denies(tmp_path: Path) -> None:
    """With --fail-closed a broken policy denies every tool call."""
    policy = tmp_path / "bad.yaml"
    policy.write_text("graders: [\n")
    pre = payloads("gemini")[2]
    proc = run_hook(
        "gemini", pre, "-c", policy, "--state-dir", tmp_path / "s", "--fail-closed"
    )
    assert proc.returncode == 0
    body = json.loads(proc.stdout)
    assert body["decision"] == "deny"
    assert "fail-closed" in body["reason"]


def test_garbage_payload_never_reaches_stdout(tmp_path: Path, policy: Path) -> None:
    """A payload that is not JSON is logged; stdout stays empty (fail-open)."""
    proc = subprocess.run(
        hook_cmd("claude-code", "-c", policy, "--state-dir", tmp_path / "s"),
        input="not json",
        capture_output=True,
        encoding="utf-8",
        timeout=60,
        check=False,
    )
    assert (proc.returncode, proc.stdout) == (0, "")
    assert "trajgrade hook:" in proc.stderr


def test_state_from_another_config_is_reset(tmp_path: Path, policy: Path) -> None:
    """A session state written under another config is not reused (logged, graded afresh)."""
    first = payloads("claude-code")
    args = ("--state-dir", tmp_path / "s")
    assert run_hook("claude-code", first[0], "-c", policy, *args).returncode == 0
    other = tmp_path / "other.yaml"
    other.write_text("graders:\n  - type: turn-count\n    config: {max: 5}\n")
    proc = run_hook("claude-code", first[1], "-c", other, *args)
    assert proc.returncode == 0
    assert "state_from_other_config" in proc.stderr


def test_abort_marked_call_is_denied_then_the_run_stops(tmp_path: Path) -> None:
    """on_fail: abort on a call check: Claude Code denies that call, then gets continue:false."""
    policy = tmp_path / "p.yaml"
    policy.write_text(
        "graders:\n  - type: tool-calls\n    name: hostname-aborts\n    on_fail: abort\n"
        '    config:\n      disallowed: [{name: "^Bash$", command: "/etc/hostname"}]\n'
    )
    answers = []
    for p in payloads("claude-code")[:6]:
        proc = run_hook("claude-code", p, "-c", policy, "--state-dir", tmp_path / "s")
        answers.append(json.loads(proc.stdout) if proc.stdout else None)
    assert answers[:4] == [None, None, None, None]
    assert answers[4]["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert (
        "continue" not in answers[4]
    )  # Claude Code would drop the deny's partner anyway
    assert answers[5] == {"continue": False, "stopReason": answers[5]["stopReason"]}
    assert "hostname-aborts" in answers[5]["stopReason"]
