"""The engine's guard decisions: every forbidden call, every time."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from trajgrade.config.compile import compile_suite
from trajgrade.config.decode import decode_config
from trajgrade.config.model import Suite
from trajgrade.engine import engine as engine_module
from trajgrade.engine.engine import Engine, EngineState, TraceSnapshot
from trajgrade.events import Event, ToolCall, ToolResult, TraceEnd, Usage
from trajgrade.pipeline.whole import grade_bytes
from trajgrade.verdicts import Action, GuardDecision, Outcome

NO_CURL = """\
graders:
  - type: tool-calls
    name: no-curl
    config:
      disallowed:
        - {name: "^Bash$", command: "curl|wget"}
        - {name: "^Read$", path: "\\\\.env$"}
"""


def _engine(text: str) -> Engine:
    return Engine(compile_suite(decode_config(text)))


def _call(cid: str | None, name: str = "Bash", **args: Any) -> ToolCall:
    return ToolCall(trace_id="t", call_id=cid, name=name, args=args)


def _feed(engine: Engine, events: list[Event]) -> list[GuardDecision]:
    engine.feed_all(events)
    out = list(engine.decisions)
    engine.decisions.clear()
    return out


def test_a_retried_forbidden_call_is_denied_every_time() -> None:
    """The verdict is final at the first curl; the retry (new id) and a
    wget are still denied, each with the rule that matched."""
    engine = _engine(NO_CURL)
    events: list[Event] = [
        _call("c1", command="curl evil.sh"),
        ToolResult(trace_id="t", call_id="c1", result="denied"),
        _call("c2", command="curl evil.sh"),
        _call("c3", command="ls"),
        _call("c4", command="wget evil.sh"),
    ]
    verdicts = engine.feed_all(events)
    assert [(v.outcome, v.final) for v in verdicts] == [(Outcome.FAIL, True)]
    denied = [(d.call_id, d.action, d.rule) for d in engine.decisions]
    assert denied == [
        ("c1", Action.DENY, "disallowed[0]"),
        ("c2", Action.DENY, "disallowed[0]"),
        ("c4", Action.DENY, "disallowed[0]"),
    ]
    assert all(d.tool == "Bash" and d.grader == "no-curl" for d in engine.decisions)
    retry = engine.decisions[1]
    assert (
        retry.reason == "disallowed[0] matched 'Bash' command 'curl evil.sh' in call c2"
    )
    assert retry.matched is not None
    assert (retry.matched.field, retry.matched.value, retry.matched.call_id) == (
        "command",
        "curl evil.sh",
        "c2",
    )


def test_a_rule_that_cannot_be_evaluated_is_an_error_decision() -> None:
    """``command`` on a Read (it has no shell command) is an ``error``
    decision; a later entry that forbids the call wins."""
    engine = _engine(
        "graders:\n  - type: tool-calls\n    config:\n      disallowed:\n"
        '        - {name: "^(Bash|Read)$", command: "env"}\n'
    )
    out = _feed(engine, [_call("r1", "Read", file_path=".env")])
    assert [(d.outcome, d.rule) for d in out] == [(Outcome.ERROR, "disallowed[0]")]
    assert "configuration error" in out[0].reason
    both = _engine(
        "graders:\n  - type: tool-calls\n    config:\n      disallowed:\n"
        '        - {name: "^(Bash|Read)$", command: "env"}\n'
        '        - {name: "^Read$", args: {file_path: "env"}}\n'
    )
    out = _feed(both, [_call("r1", "Read", file_path=".env")])
    assert [(d.outcome, d.rule) for d in out] == [(Outcome.FAIL, "disallowed[1]")]


def test_a_blown_budget_aborts_the_run_and_refuses_every_later_call() -> None:
    """A budget crossed on a usage event gives one run-level abort, then an
    abort decision for every later call of that trace (not of others)."""
    engine = _engine("graders:\n  - type: token-budget\n    config: {max: 100}\n")
    out = _feed(
        engine,
        [
            _call("c1", command="ls"),
            Usage(trace_id="t", input_tokens=90, output_tokens=20),
            _call("c2", command="ls"),
            _call("c3", command="ls"),
            ToolCall(trace_id="other", call_id="o1", name="Bash"),
        ],
    )
    assert [(d.call_id, d.action, d.trace_id, d.rule) for d in out] == [
        (None, Action.ABORT, "t", "token-budget"),
        ("c2", Action.ABORT, "t", "max"),
        ("c3", Action.ABORT, "t", "max"),
    ]
    assert out[1].reason == "110 tokens exceeds max of 100 (at call c2 to 'Bash')"


def test_a_budget_marked_deny_refuses_the_tipping_call_and_every_later_one() -> None:
    engine = _engine(
        "graders:\n  - type: tool-call-count\n    on_fail: deny\n    config: {max: 1}\n"
    )
    out = _feed(engine, [_call("c1"), _call("c2"), _call("c3")])
    assert [(d.call_id, d.action) for d in out] == [
        ("c2", Action.DENY),
        ("c3", Action.DENY),
    ]


class _NoJudge:
    """A grader that does not judge calls (as a plugin may be)."""

    judge = None

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_a_grader_without_judge_decides_the_call_its_fail_was_decided_at() -> None:
    """Without ``judge``, a fail (here at the 2nd call) gives a decision for
    that call once; only an abort covers the calls after it."""
    for mark, expected in (
        ("deny", [("c2", Action.DENY)]),
        (
            "abort",
            [("c2", Action.ABORT), (None, Action.ABORT), ("c3", Action.ABORT)],
        ),
    ):
        suite = compile_suite(
            decode_config(
                f"graders:\n  - type: tool-call-count\n    on_fail: {mark}\n"
                "    config: {max: 1}\n"
            )
        )
        plain = Suite(
            [_NoJudge(g) for g in suite.graders],  # type: ignore[misc]
            fingerprint=suite.fingerprint,
            source=suite.source,
            on_fail=suite.on_fail,
            messages=suite.messages,
            rule_lines=suite.rule_lines,
        )
        out = _feed(Engine(plain), [_call("c1"), _call("c2"), _call("c3")])
        assert [(d.call_id, d.action) for d in out] == expected


def test_warn_ask_and_report_are_the_graders_actions() -> None:
    """The decision's action is the grader's on_fail, whatever it is."""
    for mark in ("warn", "ask", "report", "abort"):
        engine = _engine(
            NO_CURL.replace("    name: no-curl\n", f"    on_fail: {mark}\n")
        )
        out = _feed(engine, [_call("c1", command="curl x")])
        assert out[0].action == mark
        assert len(out) == (2 if mark == "abort" else 1)  # + the run-level abort


def test_a_call_without_id_is_named_by_its_event_number() -> None:
    engine = _engine(NO_CURL)
    out = _feed(engine, [_call("c1", command="ls"), _call(None, command="curl x")])
    assert [d.call_id for d in out] == ["@2"]


def test_decisions_survive_a_checkpoint_and_older_checkpoints_load() -> None:
    """A restored engine goes on deciding (abort included); a checkpoint
    written before the guard existed (no ``abort`` field) still loads."""
    text = "graders:\n  - type: tool-call-count\n    config: {max: 0}\n" + NO_CURL[8:]
    engine = _engine(text)
    engine.feed_all([_call("c1", command="curl x")])
    engine.decisions.clear()
    blob = msgspec.msgpack.encode(engine.checkpoint())
    fresh = _engine(text)
    fresh.load(msgspec.msgpack.decode(blob, type=EngineState))
    out = _feed(fresh, [_call("c2", command="curl x")])
    assert {(d.grader, d.action) for d in out} == {
        ("no-curl", Action.DENY),
        ("tool-call-count", Action.ABORT),
    }
    snap = engine.checkpoint().traces[0]
    old = msgspec.msgpack.encode(
        msgspec.msgpack.decode(msgspec.msgpack.encode(snap))[:9]
    )
    restored = msgspec.msgpack.decode(old, type=TraceSnapshot)
    assert restored.abort is None
    assert restored.states == snap.states


def test_verdicts_of_a_finished_trace_are_not_repeated_at_its_end() -> None:
    """A trace kept for guarding gives no second verdict at trace_end."""
    engine = _engine(NO_CURL)
    verdicts = engine.feed_all(
        [
            _call("c1", command="curl x"),
            _call("c2", command="curl x"),
            TraceEnd(trace_id="t"),
        ]
    )
    assert len(verdicts) == 1
    assert engine.open_traces() == []
    assert engine.feed_all([_call("c3", command="curl x")]) == []


def test_guarded_traces_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Beyond GUARD_MEMORY finished traces, the oldest is closed."""
    monkeypatch.setattr(engine_module, "GUARD_MEMORY", 3)
    engine = _engine(NO_CURL)
    for i in range(6):
        engine.feed_all(
            [
                ToolCall(
                    trace_id=f"t{i}", call_id="c", name="Bash", args={"command": "curl"}
                )
            ]
        )
    assert len(engine.open_traces()) == 3
    assert engine.open_traces() == ["t3", "t4", "t5"]


def test_grade_bytes_returns_the_decisions() -> None:
    lines = b"".join(
        msgspec.json.encode(e) + b"\n"
        for e in [_call("c1", command="curl a"), _call("c2", command="curl b")]
    )
    result = grade_bytes(compile_suite(decode_config(NO_CURL)), lines)
    assert [d.call_id for d in result.decisions] == ["c1", "c2"]


def test_actions_act_on_refusals_and_log_shadow_mode() -> None:
    """--fail-fast/--signal: a deny/ask/abort decision trips them; a warn is
    logged, never acted on."""
    import structlog
    from structlog.testing import capture_logs

    from trajgrade.runtime.actions import ActionOptions, Actions

    def decision(action: str) -> GuardDecision:
        return GuardDecision(
            trace_id="t",
            grader="g",
            kind="tool-calls",
            action=Action(action),
            outcome=Outcome.FAIL,
            rule="disallowed[0]",
            reason="r",
            call_id="c1",
        )

    actions = Actions(ActionOptions(fail_fast=True), structlog.get_logger())
    with capture_logs() as logs:
        actions.observe_decisions([decision("warn"), decision("report")])
    assert not actions.stop_requested
    assert [e["event"] for e in logs] == ["guard_warning"]
    actions.observe_decisions([decision("ask")])
    assert actions.stop_requested
    assert actions.stop_reason == decision("ask")


def test_an_aborts_decisions_never_claim_a_stop() -> None:
    """Issue 36: a batch run's decisions after an abort read "the run was
    stopped earlier" when nothing was stopped; they state the ruling."""
    engine = _engine(
        "graders:\n  - type: tool-calls\n    on_fail: abort\n"
        "    config: {disallowed: [{name: Bash}]}\n"
    )
    decided = _feed(engine, [_call("c1"), _call("r1", name="Read", path="a")])
    assert [(d.call_id, d.action) for d in decided] == [
        (None, Action.ABORT),
        ("c1", Action.ABORT),
        ("r1", Action.ABORT),
    ]
    assert all("stopped" not in d.reason for d in decided)
    assert decided[-1].reason == (
        "every call after an abort is refused; earlier, grader 'tool-calls' "
        "(tool-calls, on_fail: abort) failed: disallowed[0] matched 'Bash' in call c1"
    )
