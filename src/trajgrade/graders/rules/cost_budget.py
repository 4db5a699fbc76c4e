"""``cost-budget``: the dollars a trace spent on models, against ``max_usd``.

Semantics (docs/rules.md, "cost-budget"):

* The cost of a ``usage`` event is its ``cost_usd`` when the source reported
  one, else its tokens priced for its ``model``: the ``prices`` table of the
  config first (exact model name), then genai-prices (dated prices, cache
  read/write prices, long-context tiers). ``input_tokens`` include cache
  reads and writes; ``output_tokens`` include reasoning tokens.
* The trace fails the moment the running total exceeds ``max_usd`` (a
  sealed verdict, emitted at once: with the default ``on_fail: abort`` the
  run is stopped there); every later call is judged ``max_usd``.
* ``warn_at: f`` (0 < f < 1): when the total first exceeds ``f * max_usd``
  (still within budget), the next call gets one ``warn`` decision (a
  Judgement with ``action: warn``, which the guard never hardens).
* ``unknown_model`` (a usage event with tokens, no ``cost_usd`` and a model
  no table prices, or no model): ``deny`` (default) fails the trace at that
  event, like an exceeded budget; ``warn`` counts it as $0 and gives the next
  call one ``warn`` decision per model; ``ignore`` counts it as $0.
* Score: 1 within budget, then ``max(0, 1 - (total - max) / max)``.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Final, Literal

import msgspec

from trajgrade.events import Event, ToolCall, Usage
from trajgrade.graders._spec import ConfigBase, ErrorList
from trajgrade.graders.matching.evidence import call_words
from trajgrade.graders.rules._prices import ModelPrice, PriceBook
from trajgrade.graders.rules._shared import aborts
from trajgrade.verdicts import Action, Decision, Judgement, Matched, Outcome

__all__ = ("GRADER_TYPES", "CostBudget", "CostBudgetConfig", "CostState")

#: Unknown model names remembered per trace (for warn-once and evidence).
UNKNOWN_MAX: Final = 16


class CostBudgetConfig(ConfigBase):
    """``{max_usd, warn_at?, prices?, unknown_model?}``."""

    max_usd: Annotated[float, msgspec.Meta(ge=0)]
    warn_at: Annotated[float, msgspec.Meta(gt=0, lt=1)] | None = None
    prices: dict[str, ModelPrice] | None = None
    unknown_model: Literal["deny", "warn", "ignore"] = "deny"


class CostState(msgspec.Struct, array_like=True, gc=False):
    """The running total and what the next call must be told."""

    usd: float = 0.0
    #: Usage events counted, and how many were priced from tokens.
    usages: int = 0
    priced: int = 0
    #: The trace failed: (rule, reason) given to every later call.
    failed: tuple[str, str] | None = None
    warned: bool = False
    #: Warnings waiting for the next call, and those for the latest call.
    notice: str = ""
    notice_now: str = ""
    #: The rule of the first waiting warning (warn_at or unknown_model).
    notice_rule: str = ""
    notice_rule_now: str = ""
    unknown: list[str] = msgspec.field(default_factory=list)


class CostBudget:
    """The compiled ``cost-budget`` grader."""

    kind: Final = "cost-budget"
    state_type = CostState
    uses_clock = False
    event_types: frozenset[type[Event]] = frozenset({Usage, ToolCall})

    def __init__(self, config: CostBudgetConfig, *, name: str) -> None:
        self.name = name
        errors = ErrorList()
        for model, price in (config.prices or {}).items():
            if not model.strip():
                errors.add("prices", "model names in prices must be non-empty")
            for key in price.__struct_fields__:
                value = getattr(price, key)
                if value is not None and not math.isfinite(value):
                    # 0 tokens x inf is NaN, and a NaN total exceeds no budget.
                    errors.add(
                        f"prices.{model}.{key}",
                        f"{key} must be a finite number of dollars per million tokens (got {value})",
                    )
        errors.raise_if_any()
        self._max = config.max_usd
        self._warn_usd = (
            None if config.warn_at is None else config.warn_at * config.max_usd
        )
        self._warn_at = config.warn_at
        self._unknown = config.unknown_model
        self._book = PriceBook(config.prices)
        self.handlers: dict[type[Any], Any] = {
            Usage: self._on_usage,
            ToolCall: self._on_call,
        }

    def start(self) -> CostState:
        return CostState()

    def step(self, state: CostState, event: Event) -> Decision | None:
        handler = self.handlers.get(type(event))
        return None if handler is None else handler(state, event)

    def tick(self, state: CostState, *, elapsed: float) -> Decision | None:
        return None

    def judge(self, state: CostState | None, call: ToolCall) -> Judgement | None:
        if aborts(self) and (state is None or state.failed is not None):
            # The budget failed at a usage event and aborted the run there:
            # the engine refuses every later call itself.
            return None
        if state is None:
            # Only a failed budget could be final before its trace ended.
            spent = Matched(rule="max_usd", tool=call.name, call_id=call.call_id)
            return Judgement(
                rule="max_usd",
                reason=f"the ${self._max:g} budget is spent (at {call_words(call)})",
                matched=spent,
            )
        if state.failed is not None:
            rule, reason = self._failure(state)
            return Judgement(
                rule=rule, reason=reason, matched=self._matched(state, rule, call)
            )
        if state.notice_now:
            rule = state.notice_rule_now
            return Judgement(
                rule=rule,
                reason=state.notice_now,
                action=Action.WARN,
                matched=self._matched(state, rule, call),
            )
        return None

    def _failure(self, state: CostState) -> tuple[str, str]:
        """The failed rule and its reason, told with the cost *now* (the
        budget was crossed at a lower one; the final verdict gives the
        final cost)."""
        assert state.failed is not None
        rule, reason = state.failed
        if rule == "max_usd":
            reason = f"cost ${state.usd:.4f} exceeds max_usd ${self._max:g}"
        return rule, reason

    @staticmethod
    def _matched(state: CostState, rule: str, call: ToolCall | None) -> Matched:
        """What the budget measured (the dollars so far), and the call."""
        return Matched(
            rule=rule,
            tool=None if call is None else call.name,
            field="cost_usd",
            value=round(state.usd, 6),
            call_id=None if call is None else call.call_id,
        )

    def finish(self, state: CostState) -> Decision:
        return self._decision(state, final=True)

    # ------------------------------------------------------------ events
    def _on_call(self, state: CostState, call: ToolCall) -> Decision | None:
        state.notice_now, state.notice_rule_now = state.notice, state.notice_rule
        state.notice = state.notice_rule = ""
        return None

    def _on_usage(self, state: CostState, u: Usage) -> Decision | None:
        state.usages += 1
        if u.cost_usd is not None and not math.isnan(u.cost_usd):
            # (A NaN cost is no cost reported, as the formats read it: a NaN
            # total would never exceed the budget.)
            cost: float | None = max(0.0, u.cost_usd)
        else:
            cost = self._book.cost(u)
            state.priced += 1
        if cost is None:
            return self._unpriced(state, u)
        state.usd += cost
        if state.failed is not None:
            return None
        if state.usd > self._max:
            state.failed = (
                "max_usd",
                f"cost ${state.usd:.4f} exceeds max_usd ${self._max:g}",
            )
            return self._decision(state, final=False)
        warn = self._warn_usd
        if warn is not None and not state.warned and state.usd > warn:
            state.warned = True
            self._notify(
                state,
                "warn_at",
                f"cost ${state.usd:.4f} is past {self._warn_at:.0%} of the ${self._max:g} budget (warn_at)",
            )
        return None

    def _unpriced(self, state: CostState, u: Usage) -> Decision | None:
        model = u.model or "(no model)"
        new = model not in state.unknown
        if new and len(state.unknown) < UNKNOWN_MAX:
            state.unknown.append(model)
        what = (
            f"usage of model {model!r} has no cost_usd and no price in `prices` or genai-prices"
            if u.model
            else "a usage event names no model and has no cost_usd, so it cannot be priced"
        )
        fix = "add it to `prices`, or set unknown_model: warn|ignore"
        if self._unknown == "deny":
            if state.failed is None:
                state.failed = ("unknown_model", f"{what}; {fix}")
                return self._decision(state, final=False)
        elif self._unknown == "warn" and new:
            self._notify(state, "unknown_model", f"{what}; counted as $0 ({fix})")
        return None

    @staticmethod
    def _notify(state: CostState, rule: str, text: str) -> None:
        if not state.notice:
            state.notice_rule = rule
        state.notice = f"{state.notice}; {text}" if state.notice else text

    def _decision(self, state: CostState, *, final: bool) -> Decision:
        usd = round(state.usd, 6)
        meta: dict[str, Any] = {
            "value": usd,
            "max": self._max,
            "usage_events": state.usages,
            "priced_from_tokens": state.priced,
        }
        if state.unknown:
            meta["unknown_models"] = list(state.unknown)
        limit = self._max
        if state.failed is not None:
            rule, reason = self._failure(state)
            meta["violated"] = rule
            score = (
                0.0
                if rule == "unknown_model"
                else max(0.0, 1.0 - (state.usd - limit) / limit)
                if limit
                else 0.0
            )
            return Decision(
                outcome=Outcome.FAIL,
                score=score,
                final=final,
                evidence=reason,
                metadata=meta,
                matched=self._matched(state, rule, None),
            )
        return Decision(
            outcome=Outcome.PASS,
            score=1.0,
            final=final,
            evidence=f"cost ${usd:.4f} within max_usd ${limit:g}",
            metadata=meta,
            matched=self._matched(state, "max_usd", None),
        )


class _CostBudgetType:
    kind = "cost-budget"
    summary = "trajgrade: dollars spent (reported cost, else tokens x genai-prices or your prices) <= max_usd; warn_at"
    origin = "trajgrade"
    config_type = CostBudgetConfig

    def build(self, config: CostBudgetConfig, *, name: str, context: Any) -> CostBudget:
        return CostBudget(config, name=name)


#: What this module contributes to the registry.
GRADER_TYPES: Final = (_CostBudgetType(),)
