"""vally metric thresholds: token-budget, tool-call-count, turn-count,
error-count, wall-time (seed 003).

Each keeps one running value and compares it with ``max``. Within budget the
score is 1; over it the score falls linearly,
``max(0, 1 - (value - max) / max(max, 1))``, and the trace fails.

What is counted (vally reads precomputed metrics whose definitions are not
public; these are trajgrade's decisions, also in docs/semantics.md):

* token-budget: ``input_tokens + output_tokens`` over all ``usage`` events
  (cached and reasoning tokens are not added: vally says "input + output").
* tool-call-count: ``tool_call`` events, completed or not.
* turn-count: ``turn_start`` events.
* error-count: ``error`` events; with ``include_tool_errors: true`` (a
  trajgrade extension) also tool results flagged ``is_error``.
* wall-time: milliseconds from the first to the last event timestamp, or, on
  a live input, the runner's clock since the trace's first event, whichever
  is larger; ``max`` is a duration string (``"30s"``, ``"2m"``, ``"1h"``,
  also ``"500ms"`` and combinations such as ``"1m30s"``). Metadata reports
  ``value`` in milliseconds and ``max`` as written.

Streaming: every value only grows, so the trace fails the moment the value
exceeds ``max``: a *sealed* fail is emitted then (outcome fixed, score still
falling). The final verdict follows at the end of the trace, or at once when
the score reaches 0.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Final

import msgspec

from trajgrade.errors import ConfigError, Location
from trajgrade.events import EVENT_TYPES as _ALL_EVENTS
from trajgrade.events import AgentError, Event, ToolCall, ToolResult, TurnStart, Usage
from trajgrade.graders._spec import ConfigBase
from trajgrade.graders.matching.evidence import call_words
from trajgrade.verdicts import Decision, Judgement, Matched, Outcome

__all__ = (
    "GRADER_TYPES",
    "METRIC_THRESHOLDS",
    "CountConfig",
    "ErrorCountConfig",
    "MetricState",
    "MetricThreshold",
    "WallTimeConfig",
    "parse_duration_ms",
)

#: A budget vally (JavaScript) holds exactly: up to Number.MAX_SAFE_INTEGER.
#: It also keeps a running total within what a checkpoint (msgpack, 64
#: bits) can hold: a total is kept only while under twice the budget.
MAX_BUDGET: Final = 2**53 - 1
NonNegativeInt = Annotated[int, msgspec.Meta(ge=0, le=MAX_BUDGET)]


class CountConfig(ConfigBase):
    """``{max}``: a non-negative integer."""

    max: NonNegativeInt


class ErrorCountConfig(ConfigBase):
    """``{max, include_tool_errors?}``."""

    max: NonNegativeInt
    include_tool_errors: bool = False


class WallTimeConfig(ConfigBase):
    """``{max}``: a duration string."""

    max: Any


class MetricState(msgspec.Struct, array_like=True, gc=False):
    """The running value, and for wall-time the time span seen so far."""

    value: float = 0
    sealed: bool = False
    first_ts: float | None = None
    last_ts: float | None = None
    clock_ms: float = 0


_DURATION: Final = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_MS: Final = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}


def parse_duration_ms(text: str) -> float | None:
    """``"1m30s"`` -> 90000.0; None when ``text`` is not a duration."""
    text = text.strip()
    pos, total = 0, 0.0
    for m in _DURATION.finditer(text):
        if m.start() != pos:
            return None
        total += float(m.group(1)) * _UNIT_MS[m.group(2)]
        pos = m.end()
    if pos != len(text) or not text:
        return None
    return total if math.isfinite(total) else None


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


class MetricThreshold:
    """One compiled metric-threshold grader."""

    state_type = MetricState

    def __init__(
        self,
        *,
        kind: str,
        name: str,
        unit: str,
        limit: float,
        shown_max: Any,
        event_types: frozenset[type[Event]],
        measure: Any,
        uses_clock: bool = False,
    ) -> None:
        self.kind = kind
        self.name = name
        self.event_types = event_types
        self.uses_clock = uses_clock
        self._unit = unit
        self._limit = limit
        self._shown_max = shown_max
        self._measure = measure
        if measure is _count:
            #: The engine's fast path for counters (step without the measure
            #: call): every routed event moves the value by one.
            self.handlers: dict[type[Any], Any] = dict.fromkeys(
                event_types, self._count_step
            )

    def start(self) -> MetricState:
        return MetricState()

    def step(self, state: MetricState, event: Event) -> Decision | None:
        before = state.value
        self._measure(state, event)
        if state.value == before:
            return None
        return self._check(state)

    def _count_step(self, state: MetricState, event: Event) -> Decision | None:
        value = state.value + 1
        state.value = value
        return None if value <= self._limit else self._check(state)

    def tick(self, state: MetricState, *, elapsed: float) -> Decision | None:
        if not self.uses_clock:
            return None
        clock_ms = round(elapsed * 1000)
        if clock_ms <= state.clock_ms:
            return None
        state.clock_ms = clock_ms
        if clock_ms <= state.value:
            return None
        state.value = clock_ms
        return self._check(state)

    def deadline(self, state: MetricState) -> float | None:
        """The earliest elapsed seconds at which ``tick`` may decide
        something (the engine ticks this trace only then; events only move
        it later): past the budget (sealed fail), then at the value whose
        score is 0 (final). A little early, never late: ``tick`` rounds."""
        if not self.uses_clock:
            return None
        limit = self._limit
        ms = limit + max(limit, 1.0) - 1.0 if state.sealed else limit - 1.0
        return max(ms, 0.0) / 1000.0

    def finish(self, state: MetricState) -> Decision:
        return self._decision(state, final=True)

    def judge(self, state: MetricState | None, call: ToolCall) -> Judgement | None:
        """The guard: once the budget is exceeded, every call is over it —
        the call that tipped it (``step`` counted it first) and every later
        one (rule ``max``). ``state`` is None only after a final fail (a
        budget finalises early only at its score floor)."""
        if state is None:
            text = f"the budget of {self._shown_max} {self._unit} is spent"
            value: float | None = None
        elif state.value > self._limit:
            value = _number(state.value)
            text = f"{value} {self._unit} exceeds max of {self._shown_max}"
        else:
            return None
        matched = Matched(
            rule="max",
            tool=call.name,
            field=None if value is None else self._unit,
            value=value,
            call_id=call.call_id,
        )
        return Judgement(
            rule="max", reason=f"{text} (at {call_words(call)})", matched=matched
        )

    def score(self, value: float) -> float:
        """vally's linear score for ``value``."""
        limit = self._limit
        if value <= limit:
            return 1.0
        return max(0.0, 1.0 - (value - limit) / max(limit, 1.0))

    def _check(self, state: MetricState) -> Decision | None:
        if state.value <= self._limit:
            return None
        if self.score(state.value) == 0.0:
            return self._decision(state, final=True)
        if not state.sealed:
            state.sealed = True
            return self._decision(state, final=False)
        return None

    def _decision(self, state: MetricState, *, final: bool) -> Decision:
        value = _number(state.value)
        score = self.score(state.value)
        if state.value <= self._limit:
            outcome = Outcome.PASS
            evidence = f"{value} {self._unit} (within budget of {self._shown_max})"
        else:
            outcome = Outcome.FAIL
            evidence = f"{value} {self._unit} exceeds max of {self._shown_max}"
        return Decision(
            outcome=outcome,
            score=score,
            final=final,
            evidence=evidence,
            metadata={"value": value, "max": self._shown_max},
            # (vally's evidence text above is the conformance cases'.)
            matched=Matched(rule="max", field=self._unit, value=value),
        )


# ------------------------------------------------------------------ measures
def _tokens(state: MetricState, event: Event) -> None:
    u: Usage = event  # type: ignore[assignment]
    # A count below zero (a broken or hostile log) is none, not a refund.
    state.value += max(0, u.input_tokens) + max(0, u.output_tokens)


def _count(state: MetricState, event: Event) -> None:
    state.value += 1


def _errors_and_tool_errors(state: MetricState, event: Event) -> None:
    if type(event) is AgentError or getattr(event, "is_error", False):
        state.value += 1


def _span(state: MetricState, event: Event) -> None:
    ts = event.ts
    if ts is None:
        return
    if state.first_ts is None or ts < state.first_ts:
        state.first_ts = ts
    if state.last_ts is None or ts > state.last_ts:
        state.last_ts = ts
    span = round((state.last_ts - state.first_ts) * 1000)
    if span > state.value:
        state.value = span


class _CountType:
    origin = "vally"

    def __init__(
        self,
        kind: str,
        summary: str,
        unit: str,
        events: frozenset[type[Event]],
        measure: Any,
    ) -> None:
        self.kind = kind
        self.summary = summary
        self.config_type: type[Any] = CountConfig
        self._unit = unit
        self._events = events
        self._measure = measure

    def build(self, config: Any, *, name: str, context: Any) -> MetricThreshold:
        return MetricThreshold(
            kind=self.kind,
            name=name,
            unit=self._unit,
            limit=float(config.max),
            shown_max=config.max,
            event_types=self._events,
            measure=self._measure,
        )


class _ErrorCountType(_CountType):
    def __init__(self) -> None:
        super().__init__(
            "error-count",
            "vally: number of error events <= max (max: 0 requires none)",
            "errors",
            frozenset({AgentError}),
            _count,
        )
        self.config_type = ErrorCountConfig

    def build(self, config: Any, *, name: str, context: Any) -> MetricThreshold:
        grader = super().build(config, name=name, context=context)
        if config.include_tool_errors:
            grader.event_types = frozenset({AgentError, ToolResult})
            grader._measure = _errors_and_tool_errors
        return grader


class _WallTimeType:
    kind = "wall-time"
    summary = "vally: wall-clock time of the trace <= max (duration such as 30s, 2m, 1h); fires on the runner's clock"
    origin = "vally"
    config_type = WallTimeConfig

    def build(
        self, config: WallTimeConfig, *, name: str, context: Any
    ) -> MetricThreshold:
        raw = config.max
        limit = parse_duration_ms(raw) if isinstance(raw, str) else None
        if limit is None:
            hint = (
                " (a bare number has no unit)"
                if isinstance(raw, int | float) and not isinstance(raw, bool)
                else ""
            )
            msg = f'wall-time max must be a finite duration string such as "30s", "2m", "1h" or "1m30s" (got {raw!r}){hint}'
            raise ConfigError(msg, location=Location(field="max"))
        return MetricThreshold(
            kind=self.kind,
            name=name,
            unit="ms",
            limit=limit,
            shown_max=raw,
            event_types=frozenset(_ALL_EVENTS.values()),
            measure=_span,
            uses_clock=True,
        )


METRIC_THRESHOLDS: Final = (
    _CountType(
        "token-budget",
        "vally: input + output tokens over the trace <= max",
        "tokens",
        frozenset({Usage}),
        _tokens,
    ),
    _CountType(
        "tool-call-count",
        "vally: number of tool calls <= max",
        "tool calls",
        frozenset({ToolCall}),
        _count,
    ),
    _CountType(
        "turn-count",
        "vally: number of agent turns (turn_start events) <= max",
        "turns",
        frozenset({TurnStart}),
        _count,
    ),
    _ErrorCountType(),
    _WallTimeType(),
)

#: What this module contributes to the registry.
GRADER_TYPES: Final = METRIC_THRESHOLDS
