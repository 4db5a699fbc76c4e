"""One session's grading state, and the step that turns a payload into a decision.

A hook session is one trace. Its state is plain data (:class:`SessionState`):
the engine's checkpoint, the transcript cursor for token usage, Gemini's open
calls, and the sticky stop reason. The cold path loads it from a file, steps
and saves it; the daemon keeps it in memory. Both call :func:`step`, so
they decide alike, and both grade exactly what ``Engine.feed_many`` would
for the same events streamed in one process (the checkpoint is the engine's
own).

What a failed verdict does is the grader's ``on_fail`` (``suite.on_fail``,
see docs/hooks.md): ``deny`` refuses the pending call
when a final fail was decided by that call (a fail decided elsewhere, e.g. a
``required`` call missing at the end, can only be reported); ``abort`` stops
the run, whatever decided it, and also refuses the call that decided a
final fail of a grader that judges calls (not of a budget, which the call
merely tips over); ``report`` only reports. A fail counts the
moment its outcome is sealed (a budget seals its fail when crossed; the final
verdict follows with its score). ``error`` outcomes are reported, never acted on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import msgspec

from trajgrade.engine import Engine, EngineState
from trajgrade.hooks.answers import Answer, answer
from trajgrade.hooks.payloads import OpenCall, translate
from trajgrade.hooks.usage import Cursor, read_usage
from trajgrade.verdicts import Outcome, Verdict

if TYPE_CHECKING:
    from trajgrade.config import Suite

__all__ = ("STATE_VERSION", "SessionState", "Step", "on_fail_of", "step")

STATE_VERSION: Final = 1
#: Metric thresholds: their fail ends the run unless the config says otherwise
#: (when the suite carries no ``on_fail``), and never denies the call that
#: crossed them.
_BUDGETS: Final = frozenset(
    ("token-budget", "tool-call-count", "turn-count", "error-count", "wall-time")
)


class SessionState(msgspec.Struct, kw_only=True):
    """Everything one hook session needs between invocations."""

    version: int = STATE_VERSION
    agent: str
    session: str
    #: ``Suite.fingerprint`` of the config that built this state.
    fingerprint: str
    engine: EngineState | None = None
    cursor: Cursor = msgspec.field(default_factory=Cursor)
    #: Set once a fail with ``on_fail: abort`` happened; every later
    #: invocation repeats it.
    stopped: str | None = None
    next_call: int = 0
    open_calls: list[OpenCall] = msgspec.field(default_factory=list)
    ended: bool = False
    created: float = 0.0
    updated: float = 0.0


class Step(msgspec.Struct, kw_only=True):
    """What one invocation decided."""

    answer: Answer
    verdicts: list[Verdict]
    event: str
    deny: str | None = None
    stop: str | None = None


def on_fail_of(suite: Suite, grader: str, kind: str) -> str:
    """``abort``, ``deny`` or ``report`` for a failed verdict of ``grader``."""
    mapping: Any = getattr(suite, "on_fail", None)
    if mapping is not None and grader in mapping:
        return str(mapping[grader])
    return "abort" if kind in _BUDGETS else "deny"


def new_state(agent: str, session: str, suite: Suite, now: float) -> SessionState:
    """A fresh state for a session first seen now."""
    return SessionState(
        agent=agent,
        session=session,
        fingerprint=suite.fingerprint,
        created=now,
        updated=now,
    )


def step(
    suite: Suite,
    state: SessionState,
    payload: dict[str, Any],
    *,
    now: float,
    engine: Engine | None = None,
) -> Step:
    """Grade one payload against ``state`` (updated in place).

    ``engine``, when given, already holds this session's trace (the daemon
    keeps one per session); otherwise one is built from the checkpoint.
    Raises ``ValueError`` for a payload the agent would never send.
    """
    agent = state.agent
    tr, state.next_call = translate(
        agent, payload, now=now, open_calls=state.open_calls, next_call=state.next_call
    )
    sid = state.session
    if engine is None:
        engine = Engine(suite)
        if state.engine is not None:
            engine.load(state.engine)
    before = engine.feed_many(
        read_usage(agent, tr.transcript, state.cursor), now=now, default_trace=sid
    )
    before += engine.tick(now)
    at = engine.feed_many(tr.events, now=now, default_trace=sid)
    engine.anomalies.clear()
    state.engine = engine.checkpoint()
    state.updated = now
    state.ended = state.ended or tr.ends
    deny: list[str] = []
    stop: str | None = None
    for v in (*before, *at):
        if v.outcome is not Outcome.FAIL:
            continue
        action = on_fail_of(suite, v.grader, v.kind)
        if action == "report":
            continue
        if action == "abort" and stop is None and state.stopped is None:
            stop = f"trajgrade stopped this run: grader {v.grader!r} ({v.kind}) failed: {v.evidence}"
        if tr.gate and v.final and v.kind not in _BUDGETS and any(v is a for a in at):
            # The pending call is the offence: it must not run, abort or not
            # (Claude Code runs the tool of a bare continue:false). A budget
            # the call merely tips over stops the run instead.
            deny.append(f"grader {v.grader!r} ({v.kind}) failed: {v.evidence}")
    deny_reason = "trajgrade denied this call: " + "; ".join(deny) if deny else None
    pending = state.stopped
    if stop is not None:
        state.stopped = stop
    if deny_reason is not None and agent == "claude-code":
        # Claude Code honours only the deny of a deny + continue:false; the
        # stop goes out on the next invocation (``state.stopped``).
        stop_now = None
    else:
        stop_now = stop or pending
    return Step(
        answer=answer(agent, tr.event, deny=deny_reason, stop=stop_now),
        verdicts=[*before, *at],
        event=tr.event,
        deny=deny_reason,
        stop=stop_now,
    )
