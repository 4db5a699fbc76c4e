"""``flow``: temporal and data-flow rules over a trace, judged call by call.

Semantics (docs/rules.md, "flow"):

* ``after`` is the trigger: a tool matcher (fires at the matching call; with
  a ``result`` filter, at that call's matching result), or
  ``{secret: args|result|any}`` (fires at a call whose arguments, or a
  result whose text, contain a credential detect-secrets recognises). The
  triggering event itself is not judged by the rule it triggers, except a
  call carrying a secret in its arguments under ``forbid``: that call is the
  leak itself.
* ``forbid``: once ``after`` fired, every call matching ``forbid`` is a
  violation ("once a secret was read, no network egress").
* ``require`` (+ ``within``): after ``after`` fires, a call matching
  ``require`` must follow: within ``within`` calls (an integer) or seconds of
  event time (a duration), else before the trace ends. Once overdue, every
  call that is not a ``require`` call is a violation until one is made.
  The obligation is not renewed by further triggers while it is open.
* Binding: ``bind`` names what the triggering events give: an argument
  (``bind: file_path``), ``result`` (identifier-like values in the result:
  at least ``min_length`` characters with a letter and a digit), or
  ``secret`` (the detected secrets). With ``unless_bound: arg`` a
  ``forbid`` call is a violation unless its ``arg`` equals a bound value
  ("edit only a file that was read"); with ``if_bound: arg`` it is one when
  its ``arg`` contains a bound value ("no fetch URL with a value taken from a
  result"). At most ``max_values`` values are kept, the most recent ones.
* The trace fails at its first violation (sealed) and stays open so every
  later call is judged; the final verdict comes at the end of the trace.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final

import msgspec

from trajgrade.errors import GradeError
from trajgrade.events import Event, ToolCall, ToolResult
from trajgrade.graders._spec import ErrorList
from trajgrade.graders.matching._match import js_stringify
from trajgrade.graders.matching.evidence import REDACTED, call_matched
from trajgrade.graders.rules._flow_binding import (
    if_bound_hit,
    read_binding,
    unless_bound_hit,
)
from trajgrade.graders.rules._flow_parts import (
    FlowConfig,
    SecretTrigger,
    kept_form,
    read_after,
    time_of,
)
from trajgrade.graders.rules._shared import (
    VIEWS,
    aborts,
    arg_values,
    call_label,
    compile_matcher,
    could_not_judge,
    error_decision,
    error_ruling,
    matches,
    parse_window,
)
from trajgrade.verdicts import Decision, Judgement, Matched, Outcome

if TYPE_CHECKING:
    from trajgrade.graders.matching._secrets import SecretScanner
    from trajgrade.graders.matching._tool_match import Matcher

__all__ = ("GRADER_TYPES", "Flow", "FlowConfig", "FlowState", "SecretTrigger")

#: Calls whose results a trigger still waits for (oldest dropped beyond).
PENDING_MAX: Final = 64
_TOKEN: Final = re.compile(r"[^\s\"'`<>()\[\]{},;|]+")
#: What ``bind`` and friends may name besides an argument of the call.
_NOT_ARGUMENTS: Final = VIEWS | {"result", "secret"}


class FlowState(msgspec.Struct, array_like=True, gc=False):
    """Whether ``after`` fired, the open obligation, the bound values."""

    fired: bool = False
    #: What fired first (evidence).
    trigger: str = ""
    #: Calls of ``after`` waiting for their results, oldest first.
    pending: list[str] = msgspec.field(default_factory=list)
    #: A ``require`` obligation is open: calls since, deadline (event time).
    due: bool = False
    since: int = 0
    deadline: float | None = None
    due_from: str = ""
    #: Bound values, oldest first (a dict: ordered, no repeats).
    values: dict[str, None] = msgspec.field(default_factory=dict)
    last_ts: float | None = None
    calls: int = 0
    violations: int = 0
    first: str = ""
    hit: tuple[str, str] | None = None
    #: Why the latest call could not be judged ("": it could); how many
    #: events could not be, and the first reason.
    error: str = ""
    errors: int = 0
    first_error: str = ""
    #: What the first violating call matched (the final verdict names it).
    first_matched: Matched | None = None


class Flow:
    """The compiled ``flow`` grader."""

    kind: Final = "flow"
    state_type = FlowState
    uses_clock = False

    def __init__(self, config: FlowConfig, *, name: str, timeout: float) -> None:
        self.name = name
        errors = ErrorList()
        self._after, self._secret = read_after(config.after, timeout, errors)
        if (config.forbid is None) == (config.require is None):
            errors.add("forbid", "give exactly one of forbid or require")
        self._forbid = (
            None
            if config.forbid is None
            else compile_matcher(config.forbid, "forbid", timeout, errors)
        )
        self._require = (
            None
            if config.require is None
            else compile_matcher(
                config.require, "require", timeout, errors, credit=True
            )
        )
        self._within_calls: int | None = None
        self._within_s: float | None = None
        self._read_within(config, errors)
        self._bind = config.bind
        self._unless = config.unless_bound
        self._if = config.if_bound
        read_binding(config, self._after, self._secret, errors)
        errors.raise_if_any()
        self._max_values = config.max_values
        self._min_length = config.min_length
        self._scanner: SecretScanner | None = None
        if self._secret is not None:
            from trajgrade.graders.matching._secrets import SecretScanner

            self._scanner = SecretScanner()
        #: The trigger waits for results (a result filter, or bind: result).
        self._on_results = self._secret in ("result", "any") or (
            self._after is not None
            and (self._after.result is not None or self._bind == "result")
        )
        self.handlers: dict[type[Any], Any] = {ToolCall: self._on_call}
        if self._on_results:
            self.handlers[ToolResult] = self._on_result
        self.event_types: frozenset[type[Event]] = frozenset(self.handlers)

    def bindings(self) -> tuple[tuple[str, str, Matcher], ...]:
        """(option, argument, the matcher whose calls give it) for each
        option naming a plain argument, for ``trajgrade check --agent``."""
        given = (
            ("bind", self._bind, self._after),
            ("unless_bound", self._unless, self._forbid),
            ("if_bound", self._if, self._forbid),
        )
        return tuple(
            (key, name, m)
            for key, name, m in given
            if name is not None and m is not None and name not in _NOT_ARGUMENTS
        )

    # ------------------------------------------------------------ config
    def _read_within(self, config: FlowConfig, errors: ErrorList) -> None:
        w = config.within
        if w is None:
            return
        if config.require is None:
            errors.add("within", "within applies to require; drop it or give require")
        elif isinstance(w, int) and not isinstance(w, bool):
            if w < 1:
                errors.add("within", f"within must be at least 1 call (got {w})")
            self._within_calls = w
        else:
            self._within_s = parse_window(w, "within", errors)

    # ------------------------------------------------------------ contract
    def start(self) -> FlowState:
        return FlowState()

    def step(self, state: FlowState, event: Event) -> Decision | None:
        handler = self.handlers.get(type(event))
        return None if handler is None else handler(state, event)

    def tick(self, state: FlowState, *, elapsed: float) -> Decision | None:
        return None

    def judge(self, state: FlowState | None, call: ToolCall) -> Judgement | None:
        if state is None:
            return None
        if state.hit is None:
            return error_ruling(self.kind, state, self)
        if state.violations > 1 and aborts(self):
            return None  # the run was aborted at the first violation
        rule, reason = state.hit
        return Judgement(
            rule=rule,
            reason=reason,
            matched=self._matched(state, rule, call),
            message=self._message(rule),
        )

    def _matched(self, state: FlowState, rule: str, call: ToolCall) -> Matched:
        """What the rule matched on ``call``; a value bound from a secret
        is hidden in it, as in the reason."""
        m = self._require if rule == "require" else self._forbid
        view = None if m is None or rule == "require" else m.matched_view(call)
        if self._bind == "secret" and state.values:
            bound = tuple(state.values)

            def hide(text: str) -> str:
                for value in bound:
                    text = text.replace(value, REDACTED)
                return text

            return call_matched(rule, call, view=view, redact=hide)
        return call_matched(rule, call, view=view)

    def _message(self, rule: str) -> str | None:
        """The ``message:`` of the matcher whose rule this is."""
        m = self._require if rule == "require" else self._forbid
        return None if m is None else m.message

    def finish(self, state: FlowState) -> Decision:
        meta: dict[str, Any] = {
            "calls": state.calls,
            "violations": state.violations,
            "fired": state.fired,
        }
        if self._bind is not None:
            meta["bound_values"] = len(state.values)
        problems = []
        if state.violations:
            more = (
                f" ({state.violations} violating calls in all)"
                if state.violations > 1
                else ""
            )
            problems.append(state.first + more)
        if state.due:
            problems.append(
                f"{state.due_from}, but no call matching {self._require_label()} followed before the trace ended"
            )
        if problems:
            return Decision(
                outcome=Outcome.FAIL,
                score=0.0,
                evidence="; ".join(problems),
                metadata=meta,
                matched=state.first_matched,
                message=None
                if state.first_matched is None
                else self._message(state.first_matched.rule),
            )
        if state.errors:
            return error_decision(state)
        text = (
            f"after fired ({state.trigger}); no violation in {state.calls} call(s)"
            if state.fired
            else f"after never fired in {state.calls} call(s)"
        )
        return Decision(outcome=Outcome.PASS, score=1.0, evidence=text, metadata=meta)

    # ------------------------------------------------------------ events
    def _on_call(self, state: FlowState, call: ToolCall) -> Decision | None:
        state.hit = None
        state.error = ""
        state.calls += 1
        t = time_of(state, call.ts)
        after = self._after
        if after is None and self._forbid is not None:
            # A secret in a call's arguments was in the agent's hands before
            # the call: the call that sends it is the leak, judged with it.
            self._secret_in_args(state, call, t)
            return self._record(state, self._judged(state, call, t), call)
        hit = self._judged(state, call, t)
        try:
            fires = after is not None and matches(after, call)
        except GradeError as exc:
            could_not_judge(state, exc)
            fires = False
        if fires:
            assert after is not None
            if after.result is None:
                self._fire(state, f"{call_label(call)} matched after", t)
                if self._bind is not None and self._bind != "result":
                    for value in arg_values(call, self._bind):
                        self._keep(state, value)
            if self._on_results:
                pending = state.pending
                pending.append(call.call_id or f"#{state.calls}")
                if len(pending) > PENDING_MAX:
                    del pending[0]
        elif after is None:
            self._secret_in_args(state, call, t)
        return self._record(state, hit, call)

    def _secret_in_args(self, state: FlowState, call: ToolCall, t: float) -> None:
        """``after: {secret: args|any}`` fires at a call with a credential
        in its arguments."""
        if self._secret not in ("args", "any") or self._scanner is None:
            return
        text = js_stringify(call.args) if call.args is not None else call.args_raw
        found = self._scanner.find(text or "")
        if found:
            kinds = ", ".join(sorted({k for k, _ in found}))
            self._fire(
                state, f"{call_label(call)} has a secret in its arguments ({kinds})", t
            )
            self._keep_secrets(state, found)

    def _on_result(self, state: FlowState, result: ToolResult) -> Decision | None:
        t = time_of(state, result.ts)
        cid = result.call_id
        pending = state.pending
        paired = False
        if cid is None:
            if pending and self._after is not None:
                cid = pending.pop(0)
                paired = True
        elif cid in pending:
            pending.remove(cid)
            paired = True
        after = self._after
        if paired and after is not None:
            text = js_stringify(result.result)
            try:
                fires = after.result is None or after.result.search(text)
            except GradeError as exc:
                could_not_judge(state, exc)
                fires = False
            if fires:
                if after.result is not None:
                    self._fire(
                        state,
                        f"the result of call {cid} matched after",
                        t,
                    )
                if self._bind == "result":
                    self._keep_tokens(state, text)
        elif self._secret in ("result", "any") and self._scanner is not None:
            found = self._scanner.find(js_stringify(result.result))
            if found:
                kinds = ", ".join(sorted({k for k, _ in found}))
                self._fire(
                    state, f"the result of call {cid or '?'} has a secret ({kinds})", t
                )
                self._keep_secrets(state, found)
        return None

    def _judged(
        self, state: FlowState, call: ToolCall, t: float
    ) -> tuple[str, str] | None:
        """``_check``; a matcher that ran out of time gives an error ruling."""
        try:
            return self._check(state, call, t)
        except GradeError as exc:
            could_not_judge(state, exc)
            return None

    def _check(
        self, state: FlowState, call: ToolCall, t: float
    ) -> tuple[str, str] | None:
        """The rule's ruling on one call: (option violated, reason), or None."""
        if state.due and self._require is not None:
            return self._overdue(state, call, t, self._require)
        forbid = self._forbid
        if forbid is None or not matches(forbid, call):
            return None
        if self._unless is not None:
            return unless_bound_hit(call, self._unless, self._bind, state.values)
        if self._if is not None:
            return if_bound_hit(call, self._if, self._bind, state.values, state.trigger)
        if state.fired:
            return (
                "forbid",
                f"{call_label(call)} matches forbid after {state.trigger}",
            )
        return None

    def _overdue(
        self, state: FlowState, call: ToolCall, t: float, require: Matcher
    ) -> tuple[str, str] | None:
        """While a ``require`` obligation is open: the call meets it, or is
        refused once the obligation is past ``within``."""
        if matches(require, call):
            state.due = False
            return None
        state.since += 1
        over = (
            self._within_calls is not None and state.since > self._within_calls
        ) or (state.deadline is not None and t > state.deadline)
        if not over:
            return None
        limit = (
            f"{self._within_calls} call(s)"
            if self._within_calls is not None
            else f"{self._within_s:g}s"
        )
        return (
            "require",
            f"{call_label(call)} is refused: {state.due_from}, and no call matching {self._require_label()} followed within {limit}",
        )

    # ------------------------------------------------------------ helpers
    def _fire(self, state: FlowState, what: str, t: float) -> None:
        if not state.fired:
            state.fired = True
            state.trigger = what
        if self._require is not None and not state.due:
            state.due = True
            state.since = 0
            state.due_from = f"after {what}"
            state.deadline = None if self._within_s is None else t + self._within_s

    def _keep(self, state: FlowState, value: str) -> None:
        values = state.values
        value = kept_form(value, exact=self._unless is not None)
        values.pop(value, None)
        values[value] = None
        if len(values) > self._max_values:
            del values[next(iter(values))]

    def _keep_tokens(self, state: FlowState, text: str) -> None:
        n = self._min_length
        for token in _TOKEN.findall(text):
            if (
                len(token) >= n
                and any(c.isdigit() for c in token)
                and any(c.isalpha() for c in token)
            ):
                self._keep(state, token)

    def _keep_secrets(self, state: FlowState, found: list[tuple[str, str]]) -> None:
        if self._bind == "secret":
            for _, value in found:
                if len(value) >= 4:
                    self._keep(state, value)

    def _record(
        self, state: FlowState, hit: tuple[str, str] | None, call: ToolCall
    ) -> Decision | None:
        if hit is None:
            return None
        state.hit = hit
        state.violations += 1
        if state.violations > 1:
            return None
        state.first = hit[1]
        state.first_matched = self._matched(state, hit[0], call)
        return Decision(
            outcome=Outcome.FAIL,
            score=0.0,
            final=False,
            evidence=hit[1],
            metadata={"violated": hit[0]},
            matched=state.first_matched,
            message=self._message(hit[0]),
        )

    def _require_label(self) -> str:
        return self._require.label if self._require is not None else "require"


class _FlowType:
    kind = "flow"
    summary = "trajgrade: after an event (a call, a result, a secret) forbid or require calls; argument binding across events; judges each call"
    origin = "trajgrade"
    config_type = FlowConfig

    def build(self, config: FlowConfig, *, name: str, context: Any) -> Flow:
        return Flow(config, name=name, timeout=context.regex_timeout)


#: What this module contributes to the registry.
GRADER_TYPES: Final = (_FlowType(),)
