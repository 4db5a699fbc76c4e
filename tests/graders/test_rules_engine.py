"""The guard rules through the engine: a decision for every call each rule
judges, the abort of a spent budget, warn_at's one warn, and checkpoints
in the middle of a trace that change no decision."""

from __future__ import annotations

import msgspec
import pytest
from tests.graders._guard import drive, recorded
from tests.graders.test_rules_modes import POLICY

from trajgrade import compile_suite, decode_config
from trajgrade.engine.engine import Engine
from trajgrade.events import ToolCall
from trajgrade.verdicts import Action, GuardDecision

SESSION = "claude-code/spotter_v2.1.39_long_session.jsonl.gz"


def _decisions(
    text: str, events: list[object], *, restart_every: int = 0
) -> list[GuardDecision]:
    suite = compile_suite(decode_config(text))
    engine = Engine(suite)
    out: list[GuardDecision] = []
    for i, e in enumerate(events):
        if restart_every and i % restart_every == 0:
            state = msgspec.msgpack.decode(
                msgspec.msgpack.encode(engine.checkpoint()),
                type=type(engine.checkpoint()),
            )
            engine = Engine(suite)
            engine.load(state)
        engine.feed(e)  # type: ignore[arg-type]
        out += engine.decisions
        engine.decisions.clear()
    engine.finish()
    return out + engine.decisions


def test_a_spent_budget_warns_once_then_aborts_the_run() -> None:
    events = recorded(SESSION)
    decided = _decisions(
        "graders:\n  - type: cost-budget\n    config: {max_usd: 1.0, warn_at: 0.5}\n",
        events,
    )
    warn, *rest = decided
    assert (warn.action, warn.rule, warn.call_id) == (
        Action.WARN,
        "warn_at",
        "toolu_01XK4qdtUEnYETQtLrNKXJBr",
    )
    run_level = [d for d in rest if d.call_id is None]
    assert [(d.action, d.rule) for d in run_level] == [(Action.ABORT, "max_usd")]
    # Every call after the crossing is refused, the first by the rule itself.
    later = [d for d in rest if d.call_id is not None]
    assert later[0].call_id == "toolu_01EZz7XoSzAy5hr5zQ1a1YPK"
    assert all(d.action is Action.ABORT for d in later)
    calls = [e for e in events if isinstance(e, ToolCall)]
    first = next(i for i, c in enumerate(calls) if c.call_id == later[0].call_id)
    assert {d.call_id for d in later} == {c.call_id for c in calls[first:]}


RULES = {
    "rate-limit": "{match: '.*', max: 4, window: 60s}",
    "loop": "{repeats: 2, within: 20, ping_pong: 4}",
    "flow": "{after: '^(Edit|Write)$', require: '^Bash$', within: 3}",
}


@pytest.mark.parametrize("kind", RULES)
def test_every_judged_call_gets_a_deny_decision(kind: str) -> None:
    text = f"graders:\n  - type: {kind}\n    config: {RULES[kind]}\n"
    (grader,) = compile_suite(decode_config(text)).graders
    events = recorded(SESSION)
    judged = [c.call_id for _, c, _ in drive(grader, events).judged]
    decided = _decisions(text, events)
    assert judged and [d.call_id for d in decided] == judged
    assert {d.action for d in decided} == {Action.DENY}


def test_checkpoints_in_the_middle_of_a_trace_change_no_decision() -> None:
    events = recorded("codex/localpush_v0.104_redacted_118_calls.jsonl")
    assert _decisions(POLICY, events, restart_every=7) == _decisions(POLICY, events)


@pytest.mark.parametrize(
    ("on_fail", "action"), [("deny", Action.WARN), ("report", Action.REPORT)]
)
def test_a_rule_can_soften_its_decision_but_never_harden_it(
    on_fail: str, action: Action
) -> None:
    """warn_at asks for warn: a deny grader warns; a report grader reports."""
    text = f"graders:\n  - type: cost-budget\n    on_fail: {on_fail}\n    config: {{max_usd: 1.0, warn_at: 0.5}}\n"
    warn = next(d for d in _decisions(text, recorded(SESSION)) if d.rule == "warn_at")
    assert warn.action is action and warn.call_id == "toolu_01XK4qdtUEnYETQtLrNKXJBr"
