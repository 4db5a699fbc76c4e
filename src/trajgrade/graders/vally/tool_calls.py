"""vally ``tool-calls``: required / disallowed / sequence tool matchers, streaming.

Semantics follow the vally documentation (seed 000); where it is silent the
decision is recorded here and in docs/semantics.md ("vally tool-calls"):

* A *completed* call is a ``tool_call`` paired with its ``tool_result`` by
  ``call_id`` (a result without an id pairs with the oldest open call).
  ``required`` counts completed calls only, as documented.
* ``disallowed`` entries without a ``result`` filter fail the trace at the
  ``tool_call`` itself, completed or not: that is what lets a runner block the
  call. Entries with ``result`` fail when a matching result arrives.
* ``sequence`` matches at invocation time; a call without a result counts.
* Steps are counted by ``turn_start`` events: calls before the first one and
  calls after the first one are both step 0 ("the first turn is step 0").
* ``final: true`` means the last ``tool_call`` event of the trace matched the
  entry and completed; any later call, finished or not, breaks it.
* ``command``/``path`` absent (or not a string) on a call whose name matches
  is the documented "configuration error": the grader gives an ``error``
  verdict at that call. ``args`` absent is a plain non-match. trajgrade
  reads ``command``/``path``/``url`` as argument views and adds ``kind`` and
  ``program`` (``_tool_match``, docs/guard-matching.md); the rule holds for
  every view.
* Score is 1.0 on pass, 0.0 otherwise (vally documents only pass/fail).

Streaming: a disallowed match, a configuration error, or a step window that
closed without its call is final at once. With no ``disallowed`` and no
``final`` entries, the grader passes as soon as every required count and the
sequence are complete. Everything else is decided at the end of the trace.
"""

from __future__ import annotations

from typing import Any, Final

from trajgrade.events import Event, ToolCall, ToolResult, TurnStart
from trajgrade.graders._spec import ConfigBase, ErrorList
from trajgrade.graders.matching._jsliteral import JSRegexError
from trajgrade.graders.matching._match import js_stringify
from trajgrade.graders.matching._tool_match import (
    ArgMissingError,
    Matcher,
    ToolMatch,
    count_text,
    regex_field,
    validate,
)
from trajgrade.graders.matching.evidence import (
    call_matched,
    quoted,
    result_matched,
    sentence,
)
from trajgrade.graders.protect.capability_filter import (
    compile_capability,
    validate_capability,
)
from trajgrade.graders.vally._name_plan import PLAN_CACHE_MAX, NamePlan
from trajgrade.graders.vally._tool_calls_state import ToolCallsState, remember
from trajgrade.graders.vally._tool_calls_text import pass_text, sequence_text
from trajgrade.verdicts import Decision, Judgement, Matched, Outcome

__all__ = (
    "GRADER_TYPES",
    "TOOL_CALLS",
    "ToolCalls",
    "ToolCallsConfig",
    "ToolCallsState",
    "ToolMatch",
)


class ToolCallsConfig(ConfigBase):
    """vally's ``tool-calls`` config (at least one list must be given)."""

    required: list[str | ToolMatch] | None = None
    disallowed: list[str | ToolMatch] | None = None
    sequence: list[str | ToolMatch] | None = None


#: The ``counts`` shared by every state of a grader without required entries
#: (never written; tests/properties/test_routing.py checks it stays empty).
_NO_COUNTS: Final[list[int]] = []


class ToolCalls:
    """The compiled ``tool-calls`` grader."""

    kind: Final = "tool-calls"
    state_type = ToolCallsState
    uses_clock = False

    def __init__(self, config: ToolCallsConfig, *, name: str, timeout: float) -> None:
        self.name = name
        errors = ErrorList()
        req = self._compile("required", config.required, errors, timeout)
        dis = self._compile("disallowed", config.disallowed, errors, timeout)
        seq = self._compile("sequence", config.sequence, errors, timeout)
        if (
            config.required is None
            and config.disallowed is None
            and config.sequence is None
        ):
            errors.add(
                "required",
                "at least one of required, disallowed or sequence must be given",
            )
        errors.raise_if_any()
        self._required = req
        self._disallowed_now = tuple(m for m in dis if m.result is None)
        self._disallowed_on_result = tuple(
            (1 << i, m) for i, m in enumerate(dis) if m.result is not None
        )
        self._dis_by_bit = {1 << i: m for i, m in enumerate(dis)}
        self._sequence = seq
        self._final_mask = sum(1 << i for i, m in enumerate(req) if m.final)
        self._windows = tuple(
            (i, m, end) for i, m in enumerate(req) if (end := m.window_end) is not None
        )
        self._track_results = bool(req or self._disallowed_on_result)
        self.reads_result = any(m.result is not None for m in (*req, *dis))
        # Steps matter to at_step/before_step only (else no turn_start here).
        self._track_steps = any(
            m.at_step is not None or m.before_step is not None for m in req
        )
        self._can_pass_early = not dis and not self._final_mask
        self._plans: dict[str, NamePlan] = {}
        #: (call, judgement) of the call _on_call last judged completely.
        self._memo: tuple[ToolCall | None, Judgement | None] = (None, None)
        #: Event type -> handler: the engine's fast path (same logic as step).
        self.handlers: dict[type[Any], Any] = {ToolCall: self._on_call}
        if self._track_results:
            self.handlers[ToolResult] = self._on_result
        if self._track_steps:
            self.handlers[TurnStart] = self._on_turn
        self.event_types: frozenset[type[Event]] = frozenset(self.handlers)
        # A pass's evidence: the same for every trace.
        self._passed = pass_text(len(req), len(dis), len(seq))

    @staticmethod
    def _compile(
        where: str,
        entries: list[str | ToolMatch] | None,
        errors: ErrorList,
        timeout: float,
    ) -> tuple[Matcher, ...]:
        out = []
        for i, entry in enumerate(entries or ()):
            spec = ToolMatch(name=entry) if isinstance(entry, str) else entry
            at = f"{where}[{i}]"
            before = len(errors.errors)
            validate(where, at, spec, errors)
            validate_capability(at, spec, errors)
            if len(errors.errors) > before:
                continue
            try:
                # An unreadable shell command is a match where a match is
                # a violation (fail closed), never where it is credit.
                fails_closed = where == "disallowed"
                out.append(
                    Matcher(
                        spec,
                        at,
                        timeout,
                        unreadable_matches=fails_closed,
                        capability=compile_capability(
                            spec, unknown_matches=fails_closed
                        ),
                    )
                )
            except JSRegexError as exc:
                errors.add(regex_field(at, spec, exc), str(exc))
        return tuple(out)

    def matchers(self) -> tuple[Matcher, ...]:
        """Every entry, for ``trajgrade check --agent``."""
        dis = tuple(self._dis_by_bit[b] for b in sorted(self._dis_by_bit))
        return (*self._required, *dis, *self._sequence)

    # ------------------------------------------------------------ contract
    def start(self) -> ToolCallsState:
        n = len(self._required)  # (_NO_COUNTS: per-trace memory)
        return ToolCallsState(counts=[0] * n if n else _NO_COUNTS, unmet=n)

    def step(self, state: ToolCallsState, event: Event) -> Decision | None:
        handler = self.handlers.get(type(event))
        return None if handler is None else handler(state, event)

    def tick(self, state: ToolCallsState, *, elapsed: float) -> Decision | None:
        return None

    def judge(self, state: ToolCallsState | None, call: ToolCall) -> Judgement | None:
        """The guard's ruling on one call: the first ``disallowed`` entry
        without a ``result`` filter that matches it, every time it is made
        (the verdict is final after the first; a retry is refused again).

        An entry that cannot be evaluated on the call (``command``/``path``
        absent) is an ``error`` judgement, unless a later entry forbids the
        call outright: a deny beats an error.
        """
        memo = self._memo
        if memo[0] is call:
            return memo[1]  # step just judged this very call
        plan = self._plans.get(call.name) or self._plan(call.name)
        error: Judgement | None = None
        for m in plan.dis_now:
            try:
                hit = not m.checks or m.matches_args(call)
            except ArgMissingError as exc:
                if error is None:
                    error = Judgement(
                        rule=m.where, reason=exc.message, outcome=Outcome.ERROR
                    )
                continue
            if hit:
                return self._forbids(m, call)
        return error

    def call_handler(self, name: str) -> Any:
        """The engine's route for calls named ``name`` (trajgrade.engine.routing):
        a name no entry can match only moves the counters."""
        plan = self._plan(name)
        if not plan.idle:
            return self._on_call
        return self._on_idle_call if self._track_results else self._count_call

    def judges_call(self, name: str) -> bool:
        """Whether ``judge`` can rule on a call named ``name`` at all."""
        return bool(self._plan(name).dis_now)

    @staticmethod
    def _forbids(m: Matcher, call: ToolCall) -> Judgement:
        matched = call_matched(m.where, call, view=m.matched_view(call))
        return Judgement(
            rule=m.where,
            reason=sentence(matched),
            matched=matched,
            message=m.message,
        )

    def finish(self, state: ToolCallsState) -> Decision:
        problems = []
        for i, m in enumerate(self._required):
            if state.counts[i] < m.min_count:
                problems.append(
                    f"{m.where} {m.label}: {count_text(state.counts[i], m)}"
                )
            elif m.final and not (state.last_ok >> i) & 1:
                problems.append(f"{m.where} {m.label}: not the final tool call")
        if state.cursor < len(self._sequence):
            problems.append(sequence_text(state.cursor, self._sequence))
        if problems:
            return self._decide(state, Outcome.FAIL, "; ".join(problems))
        return self._decide(state, Outcome.PASS, self._passed)

    # ------------------------------------------------------------ events
    def _on_turn(self, state: ToolCallsState, event: TurnStart) -> Decision | None:
        state.turns += 1
        return self._close_windows(state) if self._windows else None

    def _plan(self, name: str) -> NamePlan:
        """Which entries a tool name can match at all (memoised per name)."""
        plan = self._plans.get(name)
        if plan is None:
            plan = NamePlan.of(
                name,
                self._disallowed_now,
                self._disallowed_on_result,
                self._required,
                self._sequence,
            )
            if len(self._plans) < PLAN_CACHE_MAX:
                self._plans[name] = plan
        return plan

    def _on_call(self, state: ToolCallsState, call: ToolCall) -> Decision | None:
        # Written out on purpose: the hot path, once per tool call; with its
        # phases as helpers, a policy using every kind of entry ran 3-4 % more
        # instructions per event. Entries whose name pattern cannot match this
        # tool are filtered once per tool name (_plan); try is free in 3.11.
        # 1. Count the call; a name no entry can match stops here.
        plan = self._plans.get(call.name) or self._plan(call.name)
        seq = state.calls
        state.calls = seq + 1
        if self._final_mask:
            state.last_ok = 0
        if plan.idle:
            if self._track_results:
                remember(state, call, seq, 0, 0)
            return None
        try:
            # 2. disallowed without result: the first match fails the trace now.
            for m in plan.dis_now:
                if not m.checks or m.matches_args(call):
                    self._memo = (call, self._forbids(m, call))
                    return self._violation(state, m, call)
            # The guard's judge() follows for this call: no entry forbids it.
            # (One tuple, replaced whole: safe for threads sharing the grader;
            # judge() checks it is the same call object.)
            self._memo = (call, None)
            # 3. disallowed with result: the entries that wait for its result.
            dis = 0
            for bit, m in plan.dis_res:
                if not m.checks or m.matches_args(call):
                    dis |= bit
            # 4. required: the entries whose call side (args, step window)
            # matched; they count once the call completes.
            req = 0
            if plan.req:
                step = state.turns - 1 if state.turns else 0
                for i, m in plan.req:
                    if m.windowed and not m.in_window(step):
                        continue
                    if not m.checks or m.matches_args(call):
                        req |= 1 << i
            # 5. sequence: the cursor moves past its next entry if it matches.
            advanced = False
            if plan.seq:
                cursor = state.cursor
                if cursor in plan.seq:
                    m = self._sequence[cursor]
                    if not m.checks or m.matches_args(call):
                        state.cursor = cursor + 1
                        advanced = True
        except ArgMissingError as exc:
            return Decision(outcome=Outcome.ERROR, score=0.0, evidence=exc.message)
        # 6. Keep the call open for its result; pass once everything is met.
        if self._track_results:
            remember(state, call, seq, req, dis)
        if advanced and self._can_pass_early and self._all_met(state):
            return self._decide(state, Outcome.PASS, self._passed)
        return None

    def _all_met(self, state: ToolCallsState) -> bool:
        """Every required count and the whole sequence are complete."""
        return not state.unmet and state.cursor >= len(self._sequence)

    @staticmethod
    def _count_call(state: ToolCallsState, call: ToolCall) -> None:
        # _on_call for a name no entry matches, when results are not read.
        state.calls += 1

    def _on_idle_call(self, state: ToolCallsState, call: ToolCall) -> None:
        # _on_call for a name no entry matches, when results are read.
        seq = state.calls
        state.calls = seq + 1
        state.last_ok = 0
        remember(state, call, seq, 0, 0)

    def _on_result(self, state: ToolCallsState, result: ToolResult) -> Decision | None:
        pending = state.pending
        if not pending:
            return None
        cid = result.call_id
        if cid is None:
            cid = next(iter(pending))
        p = pending.pop(cid, None)
        if not pending:
            # An emptied dict keeps its table (~200 B per open trace).
            state.pending = None
        if p is None:
            return None  # unknown, or a call no entry waits on
        text: str | None = None
        if p.dis:
            text = js_stringify(result.result)
            m = self._forbidden_result(p.dis, text)
            if m is not None:
                return self._violation(state, m, None, result)
        ok = self._credit(state, p.req, result, text) if p.req else 0
        if p.seq == state.calls - 1:
            state.last_ok = ok & self._final_mask
        if ok and self._can_pass_early and self._all_met(state):
            return self._decide(state, Outcome.PASS, self._passed)
        return None

    # The phases of _on_result, each run only when the call has such entries.
    def _forbidden_result(self, watched: int, text: str) -> Matcher | None:
        """The first watched ``disallowed`` entry whose ``result`` filter
        matches the result's text."""
        for bit, m in self._disallowed_on_result:
            if watched & bit and m.result is not None and m.result.search(text):
                return m
        return None

    def _credit(
        self,
        state: ToolCallsState,
        waiting: int,
        result: ToolResult,
        text: str | None,
    ) -> int:
        """Count the completed call for the ``waiting`` required entries whose
        ``result`` filter (if any) matches; their bits."""
        ok = 0
        for i, m in enumerate(self._required):
            if not (waiting >> i) & 1:
                continue
            if m.result is not None:
                if text is None:
                    text = js_stringify(result.result)
                if not m.result.search(text):
                    continue
            ok |= 1 << i
            n = state.counts[i] + 1
            state.counts[i] = n
            if n == m.min_count:
                state.unmet -= 1
        return ok

    def _close_windows(self, state: ToolCallsState) -> Decision | None:
        step = state.turns - 1
        for i, m, end in self._windows:
            if step != end or state.counts[i] >= m.min_count:
                continue
            bit = 1 << i
            if any(
                p is not None and p.req & bit for p in (state.pending or {}).values()
            ):
                continue  # a call inside the window may still complete
            where = (
                f"in step {m.at_step}"
                if m.at_step is not None
                else f"before step {m.before_step}"
            )
            text = f"{m.where} {m.label}: {count_text(state.counts[i], m)} (window {where} closed at step {step})"
            return self._decide(state, Outcome.FAIL, text)
        return None

    # ------------------------------------------------------------ verdicts
    def _violation(
        self,
        state: ToolCallsState,
        m: Matcher,
        call: ToolCall | None,
        result: ToolResult | None = None,
    ) -> Decision:
        if call is not None:
            matched = call_matched(m.where, call, view=m.matched_view(call))
            text = sentence(matched)
        else:
            assert result is not None
            matched = result_matched(m.where, result, js_stringify(result.result))
            text = f"{m.where} matched the result of call {result.call_id or '?'}: {quoted(matched.value or '')}"
        step = state.turns - 1 if state.turns else 0
        at = f" at step {step}" if self._track_steps else ""
        return self._decide(
            state,
            Outcome.FAIL,
            text + at,
            violated=m.where,
            matched=matched,
            message=m.message,
        )

    def _decide(
        self,
        state: ToolCallsState,
        outcome: Outcome,
        evidence: str,
        *,
        violated: str | None = None,
        matched: Matched | None = None,
        message: str | None = None,
    ) -> Decision:
        meta: dict[str, Any] = {"tool_calls": state.calls}
        if self._track_steps:
            meta["steps"] = max(state.turns, 1)
        if self._required:
            meta["required"] = [
                {"matcher": m.where, "count": state.counts[i], "min_count": m.min_count}
                for i, m in enumerate(self._required)
            ]
        if self._sequence:
            meta["sequence"] = {"matched": state.cursor, "length": len(self._sequence)}
        if violated is not None:
            meta["violated"] = violated
        return Decision(
            outcome=outcome,
            score=1.0 if outcome is Outcome.PASS else 0.0,
            evidence=evidence,
            metadata=meta,
            matched=matched,
            message=message,
        )


class _ToolCallsType:
    kind = "tool-calls"
    summary = "vally: required / disallowed / sequence tool matchers (regex on name, args, result)"
    origin = "vally"
    config_type = ToolCallsConfig

    def build(self, config: ToolCallsConfig, *, name: str, context: Any) -> ToolCalls:
        return ToolCalls(config, name=name, timeout=context.regex_timeout)


TOOL_CALLS: Final = _ToolCallsType()

#: What this module contributes to the registry.
GRADER_TYPES: Final = (TOOL_CALLS,)
