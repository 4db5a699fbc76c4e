"""For any trace and policy, every call a deny rule matches is denied — in
batch (Engine), in StreamGrader, in ``trajgrade serve`` and in cold hook
processes replaying the session — and verdicts are what they were before
the guard existed.

The oracle matches each ``disallowed`` entry against each call with
Python's ``re`` (the generated patterns mean the same in both flavours),
independently of the grader's compiled plans.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import TOOLS, args_for, encode_jsonl, streams, suites, tool_calls_config

from trajgrade.api.stream_grader import StreamGrader
from trajgrade.config.compile import compile_suite
from trajgrade.config.decode import decode_config
from trajgrade.config.model import OnFail, Suite
from trajgrade.engine.engine import Engine
from trajgrade.events import ToolCall
from trajgrade.verdicts import Action, GuardDecision, Outcome

if TYPE_CHECKING:
    from strategies import Stream, SuiteCase


# ------------------------------------------------------------------ oracle
def _judge(entries: list[Any], name: str, args: Any) -> tuple[str, str] | None:
    """(outcome, rule) of the first entry forbidding the call; else the
    first that cannot be evaluated on it; else None."""
    args = args if isinstance(args, dict) else {}
    error = None
    for i, entry in enumerate(entries):
        spec = {"name": entry} if isinstance(entry, str) else entry
        if spec.get("result") is not None or not re.search(spec["name"], name):
            continue
        strict = [k for k in ("command", "path") if k in spec]
        if any(not isinstance(args.get(k), str) for k in strict):
            error = error or ("error", f"disallowed[{i}]")
            continue
        checks = [(k, spec[k]) for k in strict] + list((spec.get("args") or {}).items())
        if all(
            isinstance(args.get(k), str) and re.search(rx, args[k]) for k, rx in checks
        ):
            return ("fail", f"disallowed[{i}]")
    return error


def _expected(case: SuiteCase, stream: Stream) -> list[tuple[Any, ...]]:
    """Every (trace, call, grader, outcome, rule) the tool-calls graders must decide."""
    out = []
    for tid, events in stream.traces.items():
        for n, ev in enumerate(events, start=1):
            if type(ev) is not ToolCall:
                continue
            for g in case.config["graders"]:
                if g["type"] != "tool-calls":
                    continue
                j = _judge(g["config"].get("disallowed") or [], ev.name, ev.args)
                if j is not None:
                    out.append((tid, ev.call_id or f"@{n}", g["name"], *j))
    return sorted(out)


def _got(case: SuiteCase, decisions: list[GuardDecision]) -> list[tuple[Any, ...]]:
    kinds = {g["name"]: g["type"] for g in case.config["graders"]}
    return sorted(
        (d.trace_id, d.call_id, d.grader, str(d.outcome), d.rule)
        for d in decisions
        if kinds[d.grader] == "tool-calls" and d.call_id is not None
    )


class _NoJudge:
    """A grader as it was before the guard: no ``judge``."""

    judge = None

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _before(suite: Suite) -> Engine:
    """An engine that behaves as before decisions existed: nothing judges,
    nothing aborts, so finished traces are dropped at once."""
    graders = [_NoJudge(g) for g in suite.graders]
    return Engine(
        Suite(
            graders,  # type: ignore[arg-type]
            fingerprint=suite.fingerprint,
            source=suite.source,
            on_fail=dict.fromkeys((g.name for g in suite.graders), OnFail.REPORT),
            messages=suite.messages,
            rule_lines=suite.rule_lines,
        )
    )


# ------------------------------------------------------------------ batch
@settings(max_examples=200, deadline=None)
@given(case=suites(max_graders=4), stream=streams(reuse_ids=False))
def test_every_forbidden_call_is_decided_and_verdicts_are_unchanged(
    case: SuiteCase, stream: Stream
) -> None:
    engine = Engine(case.suite)
    verdicts = engine.feed_all(stream.events) + engine.finish()
    before = _before(case.suite)
    assert verdicts == before.feed_all(stream.events) + before.finish()
    assert _got(case, engine.decisions) == _expected(case, stream)
    for d in engine.decisions:
        assert d.action is Action(str(case.suite.on_fail[d.grader]))
    # After a run-level abort, every later call of that trace is refused.
    for tid, events in stream.traces.items():
        stops = [
            d.at_event
            for d in engine.decisions
            if d.trace_id == tid and d.call_id is None
        ]
        if not stops:
            continue
        later = {
            ev.call_id or f"@{n}"
            for n, ev in enumerate(events, start=1)
            if type(ev) is ToolCall and n > stops[0]
        }
        refused = {
            d.call_id
            for d in engine.decisions
            if d.trace_id == tid and d.action is Action.ABORT and d.call_id
        }
        assert later <= refused


@settings(max_examples=100, deadline=None)
@given(case=suites(max_graders=3), stream=streams(reuse_ids=False))
def test_stream_grader_decides_like_the_engine(case: SuiteCase, stream: Stream) -> None:
    engine = Engine(case.suite)
    engine.feed_all(stream.events)
    engine.finish()
    grader = StreamGrader(case.suite, fmt="trajgrade")
    for line in encode_jsonl(stream.events).splitlines():
        grader.feed(line)
    grader.finish()
    assert grader.take_decisions() == engine.decisions
    assert grader.decisions == []


# ------------------------------------------------------------------ hooks
@st.composite
def _session(draw: st.DrawFn) -> tuple[str, list[tuple[str, Any]]]:
    """A deny policy and Claude Code calls, some of them retried verbatim."""
    config = draw(tool_calls_config().filter(lambda c: c.get("disallowed")))
    policy = {"graders": [{"type": "tool-calls", "name": "guard", "config": config}]}
    calls: list[tuple[str, Any]] = []
    for _ in range(draw(st.integers(1, 5))):
        if calls and draw(st.integers(0, 2)) == 0:
            calls.append(calls[draw(st.integers(0, len(calls) - 1))])  # a retry
        else:
            name = draw(st.sampled_from(TOOLS))
            calls.append((name, draw(args_for(name))))
    return json.dumps(policy), calls


_HOOK = (sys.executable, "-m", "trajgrade", "hook", "claude-code")


def _pre(session: str, i: int, name: str, args: Any) -> dict[str, Any]:
    return {
        "session_id": session,
        "hook_event_name": "PreToolUse",
        "tool_name": name,
        "tool_input": args,
        "tool_use_id": f"toolu_{i}",
    }


def _denies(policy: str, name: str, args: Any) -> bool:
    disallowed = json.loads(policy)["graders"][0]["config"]["disallowed"]
    j = _judge(disallowed, name, args)
    return j is not None and j[0] == "fail"


def _is_deny(stdout: bytes | str) -> bool:
    if not stdout.strip():
        return False
    out = json.loads(stdout).get("hookSpecificOutput") or {}
    return out.get("permissionDecision") == "deny"


@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(session=_session())
def test_cold_hook_processes_deny_every_forbidden_call(
    session: tuple[str, list[tuple[str, Any]]], tmp_path: Path
) -> None:
    """One ``python -m trajgrade hook`` process per call, state on disk."""
    policy_text, calls = session
    policy = tmp_path / f"{uuid.uuid4().hex}.json"
    policy.write_text(policy_text)
    sid = uuid.uuid4().hex
    for i, (name, args) in enumerate(calls):
        proc = subprocess.run(
            [*_HOOK, "-c", str(policy), "--state-dir", str(tmp_path / "state")],
            input=json.dumps(_pre(sid, i, name, args)).encode(),
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        if _is_deny(proc.stdout) and b"no policy can allow that" in proc.stdout:
            continue  # the guard's built-in self-protection (`rm -rf /`)
        assert _is_deny(proc.stdout) == _denies(policy_text, name, args), (name, args)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(session=_session())
def test_serve_denies_every_forbidden_call(
    session: tuple[str, list[tuple[str, Any]]], tmp_path: Path
) -> None:
    """A real daemon over loopback HTTP, one per policy."""
    import http.client

    from trajgrade.hooks.server import HookServer

    policy_text, calls = session
    suite = compile_suite(decode_config(policy_text, json=True))
    server = HookServer(suite, port=0, state_dir=str(tmp_path / "serve"))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        sid = uuid.uuid4().hex
        for i, (name, args) in enumerate(calls):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request(
                "POST", "/hook/claude-code", body=json.dumps(_pre(sid, i, name, args))
            )
            body = conn.getresponse().read()
            conn.close()
            assert _is_deny(body) == _denies(policy_text, name, args), (name, args)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_the_oracle_can_fail() -> None:
    """The oracle is not vacuous: it forbids and errs where it should."""
    assert _judge([{"name": "^bash$", "command": "rm"}], "bash", {"command": "rm -rf"})
    assert _judge([{"name": "^bash$", "command": "rm"}], "bash", {}) == (
        "error",
        "disallowed[0]",
    )
    assert _judge(["view"], "bash", {}) is None
    assert Outcome.FAIL == "fail"
