"""``rate-limit``: at most ``max`` matching tool calls per sliding ``window``
(or per trace), judged call by call.

Semantics (docs/rules.md, "rate-limit"):

* A matching call is a violation when ``max`` matching calls were already
  counted within the ``window`` seconds before it, i.e. it would be call
  ``max + 1`` in some window ``(t - window, t]``. Without ``window``, when
  ``max`` matching calls were counted in the trace.
* A call judged a violation is not counted: the guard refused it, and a
  refused retry must not keep the window full for ever.
* Time is the call's ``ts``. A call without ``ts`` (or with one that is not
  a finite number) takes the latest timestamp of the trace's earlier
  matching calls (0 if none), and time never runs backwards (an earlier
  ``ts`` counts as the latest one): a trace without timestamps is therefore
  limited per trace, never more loosely.
* The trace fails at its first violation (a sealed verdict, emitted at once)
  and stays open so every later call is judged; the final verdict comes at
  the end of the trace. State: at most ``max`` timestamps.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Annotated, Any, Final

import msgspec

from trajgrade.errors import GradeError
from trajgrade.events import Event, ToolCall
from trajgrade.graders._spec import ConfigBase, ErrorList
from trajgrade.graders.matching.evidence import call_matched, described
from trajgrade.graders.rules._shared import (
    CallRule,
    MatcherSpec,
    aborts,
    compile_matcher,
    could_not_judge,
    error_decision,
    error_ruling,
    matches,
    parse_window,
)
from trajgrade.verdicts import Decision, Judgement, Matched, Outcome

if TYPE_CHECKING:
    from trajgrade.graders.matching._tool_match import Matcher

__all__ = (
    "GRADER_TYPES",
    "WINDOW_MAX",
    "RateLimit",
    "RateLimitConfig",
    "RateLimitState",
)


#: The largest ``max`` with a window (the state holds that many timestamps,
#: saved with every checkpoint).
WINDOW_MAX: Final = 10_000


class RateLimitConfig(ConfigBase):
    """``{match, max, window?}``."""

    match: MatcherSpec
    max: Annotated[int, msgspec.Meta(ge=0)]
    #: A duration string (``60s``, ``5m``); omitted: per trace.
    window: Any = None


class RateLimitState(msgspec.Struct, array_like=True, gc=False):
    """Counted matching calls; the latest call's ruling for ``judge``."""

    #: Window mode: times of the counted calls still inside the window,
    #: oldest first (never more than ``max``).
    times: list[float] = msgspec.field(default_factory=list)
    #: Per-trace mode: calls counted.
    counted: int = 0
    #: Latest timestamp of a matching call.
    last_ts: float | None = None
    matching: int = 0
    violations: int = 0
    #: Why the trace failed (the first violation).
    first: str = ""
    #: The reason the latest call is a violation; "" when it is not.
    hit: str = ""
    #: Why the latest call could not be judged ("": it could); how many
    #: events could not be, and the first reason.
    error: str = ""
    errors: int = 0
    first_error: str = ""
    #: What the first violating call matched (the final verdict names it).
    first_matched: Matched | None = None


class RateLimit(CallRule):
    """The compiled ``rate-limit`` grader."""

    kind: Final = "rate-limit"
    state_type = RateLimitState
    event_types: frozenset[type[Event]] = frozenset({ToolCall})

    def __init__(self, config: RateLimitConfig, *, name: str, timeout: float) -> None:
        self.name = name
        errors = ErrorList()
        matcher = compile_matcher(config.match, "match", timeout, errors)
        window = None
        if config.window is not None:
            window = parse_window(config.window, "window", errors)
            if config.max > WINDOW_MAX:
                errors.add(
                    "max",
                    f"with a window, max can be at most {WINDOW_MAX} (one timestamp "
                    f"is kept per counted call; got {config.max}); use a shorter "
                    "window with a smaller max, or drop window (a limit per trace)",
                )
        errors.raise_if_any()
        assert matcher is not None
        self._match: Matcher = matcher
        self._max = config.max
        self._window = window
        self._shown_window = config.window
        self.handlers: dict[type[Any], Any] = {ToolCall: self._on_call}

    def start(self) -> RateLimitState:
        return RateLimitState()

    def judge(self, state: RateLimitState | None, call: ToolCall) -> Judgement | None:
        if state is None:
            return None
        if not state.hit:
            return error_ruling(self.kind, state, self)
        if state.violations > 1 and aborts(self):
            return None  # the run was aborted at the first violation
        return Judgement(
            rule="max",
            reason=state.hit,
            matched=call_matched("max", call),
            message=self._match.message,
        )

    def finish(self, state: RateLimitState) -> Decision:
        meta = {
            "matching_calls": state.matching,
            "violations": state.violations,
            "max": self._max,
        }
        if self._shown_window is not None:
            meta["window"] = self._shown_window
        if state.violations:
            more = (
                f" ({state.violations} violating calls in all)"
                if state.violations > 1
                else ""
            )
            return Decision(
                outcome=Outcome.FAIL,
                score=0.0,
                evidence=state.first + more,
                matched=state.first_matched,
                message=self._match.message,
                metadata=meta,
            )
        if state.errors:
            return error_decision(state)
        per = f"per {self._shown_window}" if self._window is not None else "per trace"
        return Decision(
            outcome=Outcome.PASS,
            score=1.0,
            evidence=f"{state.matching} matching call(s), never more than {self._max} {per}",
            metadata=meta,
        )

    def _on_call(self, state: RateLimitState, call: ToolCall) -> Decision | None:
        state.hit = state.error = ""
        try:
            if not matches(self._match, call):
                return None
        except GradeError as exc:
            could_not_judge(state, exc)  # (not counted: it may be refused)
            return None
        state.matching += 1
        window = self._window
        if window is None:
            if state.counted < self._max:
                state.counted += 1
                return None
            reason = f"{described(call_matched('', call))} would be matching call {state.counted + 1} in this trace (max: {self._max} per trace)"
        else:
            t = call.ts
            last = state.last_ts
            if t is None or not math.isfinite(t) or (last is not None and t < last):
                t = last if last is not None else 0.0
            state.last_ts = t
            times = state.times
            # t - a >= window, not a <= t - window: from about 1e16 s on,
            # t - window == t would empty the window at every call.
            while times and t - times[0] >= window:
                times.pop(0)
            if len(times) < self._max:
                times.append(t)
                return None
            reason = f"{described(call_matched('', call))} would be matching call {len(times) + 1} within {self._shown_window} (max: {self._max} per {self._shown_window})"
        state.hit = reason
        state.violations += 1
        if state.violations > 1:
            return None
        state.first = reason
        state.first_matched = call_matched("max", call)
        return Decision(
            outcome=Outcome.FAIL,
            score=0.0,
            final=False,
            evidence=reason,
            metadata={"violated": "max"},
            matched=state.first_matched,
            message=self._match.message,
        )


class _RateLimitType:
    kind = "rate-limit"
    summary = "trajgrade: at most max matching calls per sliding window (60s, 5m) or per trace; judges each call"
    origin = "trajgrade"
    config_type = RateLimitConfig

    def build(self, config: RateLimitConfig, *, name: str, context: Any) -> RateLimit:
        return RateLimit(config, name=name, timeout=context.regex_timeout)


#: What this module contributes to the registry.
GRADER_TYPES: Final = (_RateLimitType(),)
