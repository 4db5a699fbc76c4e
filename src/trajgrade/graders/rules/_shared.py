"""Pieces shared by trajgrade's stateful guard rules (rate-limit, loop, flow,
cost-budget): durations, tool matchers, call fingerprints, event time.

These rules judge every tool call (``judge``) from state their ``step`` left
behind, so a call is judged exactly as often as it is stepped, in batch and
live alike.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Final

import msgspec

from trajgrade._util.digest import blake2b
from trajgrade.events import ToolCall
from trajgrade.graders.matching._jsliteral import JSRegexError
from trajgrade.graders.matching._tool_match import ArgMissingError, Matcher, ToolMatch
from trajgrade.graders.protect.capability_filter import (
    compile_capability,
    validate_capability,
)
from trajgrade.graders.vally.metric_threshold import parse_duration_ms
from trajgrade.verdicts import Decision, Judgement, Outcome

if TYPE_CHECKING:
    from collections.abc import Callable

    from trajgrade.errors import GradeError
    from trajgrade.events import Event
    from trajgrade.graders._spec import ErrorList

__all__ = (
    "VIEWS",
    "CallRule",
    "MatcherSpec",
    "aborts",
    "arg_values",
    "call_label",
    "compile_matcher",
    "could_not_judge",
    "error_decision",
    "error_ruling",
    "fingerprint",
    "matches",
    "name_can_match",
    "parse_window",
)

#: A tool matcher as written: a name regex, or a vally ToolMatch mapping.
MatcherSpec = str | ToolMatch

#: Fields of ToolMatch that only ``tool-calls`` ``required`` entries take.
_REQUIRED_ONLY: Final = ("min_count", "final", "at_step", "before_step")

_ARGS_ENCODER: Final = msgspec.json.Encoder(order="sorted")


def parse_window(value: Any, field: str, errors: ErrorList) -> float | None:
    """A duration (``"60s"``, ``"5m"``, ``"1h30m"``, ``"500ms"``) in seconds;
    records an error naming ``field`` for anything else."""
    ms = parse_duration_ms(value) if isinstance(value, str) else None
    if ms is None or ms <= 0 or not math.isfinite(ms):
        hint = (
            " (a bare number has no unit: write 60s, 5m or 1h)"
            if isinstance(value, int | float) and not isinstance(value, bool)
            else ""
        )
        errors.add(
            field,
            f'{field} must be a positive duration such as "60s", "5m", "1h" or "1m30s" '
            f"(got {value!r}){hint}",
        )
        return None
    return ms / 1000.0


def compile_matcher(
    spec: MatcherSpec,
    field: str,
    timeout: float,
    errors: ErrorList,
    *,
    allow_result: bool = False,
    credit: bool = False,
) -> Matcher | None:
    """Compile one tool matcher; errors are recorded under ``field``.
    ``credit``: a match satisfies an obligation (flow's ``require``), so a
    shell command whose programs cannot be read does not match ``program``;
    everywhere else (limits, triggers, forbids) it does (fail closed)."""
    tm = ToolMatch(name=spec) if isinstance(spec, str) else spec
    bad = False
    for key in _REQUIRED_ONLY:
        if getattr(tm, key, None) is not None:
            errors.add(
                f"{field}.{key}",
                f"{key} belongs to tool-calls 'required' entries, not to {field}; drop it",
            )
            bad = True
    if not allow_result and tm.result is not None:
        errors.add(
            f"{field}.result",
            f"{field} is decided when the call is made, before its result exists; "
            "drop result (flow's `after` may match results)",
        )
        bad = True
    before = len(errors.errors)
    validate_capability(field, tm, errors)
    if bad or len(errors.errors) > before:
        return None
    try:
        return Matcher(
            tm,
            field,
            timeout,
            unreadable_matches=not credit,
            capability=compile_capability(tm, unknown_matches=not credit),
        )
    except JSRegexError as exc:
        errors.add(field, str(exc))
        return None


def matches(m: Matcher, call: ToolCall) -> bool:
    """The call side of ``m`` matches ``call``; a call that lacks the
    ``command``/``path`` the matcher filters on does not match (these rules
    have no vally "configuration error")."""
    if not m.name(call.name):
        return False
    if not m.checks:
        return True
    try:
        return m.matches_args(call)
    except ArgMissingError:
        return False


def name_can_match(m: Matcher, name: str) -> bool:
    """Whether a call named ``name`` can match ``m`` at all (the engine's
    name routes, trajgrade.engine.routing); a name whose test fails is routed, so
    the per-call handler meets the failure as before."""
    try:
        return bool(m.name(name))
    except Exception:
        return True


class CallRule:
    """The grader plumbing of a rule that reads only tool calls, optionally
    narrowed by a ``match`` matcher (rate-limit, loop): stepped and judged
    only for names ``match`` can select (trajgrade.engine.routing), never clocked.
    Subclasses set ``_match`` and define ``_on_call``."""

    _match: Matcher | None
    _on_call: Callable[[Any, ToolCall], Decision | None]
    uses_clock = False

    def step(self, state: Any, event: Event) -> Decision | None:
        return self._on_call(state, event) if type(event) is ToolCall else None

    def tick(self, state: Any, *, elapsed: float) -> Decision | None:
        return None

    def call_handler(self, name: str) -> Any:
        """The engine's route for calls named ``name``: none for a name
        ``match`` cannot select. Such a call would only reset the rule's
        ``hit``, which the next routed call resets before ``judge`` reads it."""
        return self._on_call if self.judges_call(name) else None

    def judges_call(self, name: str) -> bool:
        """Whether ``judge`` can rule on a call named ``name`` at all."""
        return self._match is None or name_can_match(self._match, name)


#: Arguments of a shell call that only tell the user what runs (Claude
#: Code's and Gemini's ``description``, Codex's ``justification``): the model
#: rewords them when it reruns a command, so they are not part of the call.
_SHELL_NOTES: Final = ("description", "justification")


def fingerprint(call: ToolCall, *, name_only: bool = False) -> int:
    """A stable 64-bit fingerprint of a call: its tool name and its arguments
    as canonical JSON (keys sorted; a shell call's ``_SHELL_NOTES`` left
    out), or the raw argument text when the arguments are not an object.
    Call ids and timestamps are not part of it; with ``name_only`` (loop's
    ``same: name``), neither are the arguments."""
    if name_only:
        named = blake2b(call.name.encode(), digest_size=8)
        named.update(b"\x01")  # (never a whole call's fingerprint)
        return int.from_bytes(named.digest(), "big")
    args = call.args
    if args is not None:
        if any(k in args for k in _SHELL_NOTES):
            from trajgrade.graders.matching._views import call_kind

            if call_kind(call) == "shell":
                args = {k: v for k, v in args.items() if k not in _SHELL_NOTES}
        try:
            body = _ARGS_ENCODER.encode(args)
        except (TypeError, msgspec.EncodeError):
            body = repr(args).encode()
    else:
        body = (call.args_raw or "").encode()
    h = blake2b(call.name.encode(), digest_size=8)
    h.update(b"\x00")
    h.update(body)
    return int.from_bytes(h.digest(), "big")


def could_not_judge(state: Any, exc: GradeError) -> None:
    """The latest event could not be judged (a user regex ran out of time on
    a value the agent chose): the call gets an ``error`` ruling and the rule
    goes on. Ending the rule with an error verdict instead would let every
    later call through."""
    state.error = exc.message
    state.errors += 1
    if not state.first_error:
        state.first_error = exc.message


def error_ruling(kind: str, state: Any, grader: object) -> Judgement | None:
    """The ``error`` ruling on the latest call when it could not be judged
    (none once an ``abort`` rule failed: the engine refuses every call)."""
    if not state.error or (state.violations and aborts(grader)):
        return None
    return Judgement(rule=kind, reason=state.error, outcome=Outcome.ERROR)


def error_decision(state: Any) -> Decision:
    """The final verdict of a rule with no violation that could not judge
    every event: error, not pass."""
    n = state.errors
    return Decision(
        outcome=Outcome.ERROR,
        score=0.0,
        evidence=f"{n} event(s) could not be judged: {state.first_error}",
        metadata={"errors": n},
    )


def aborts(grader: object) -> bool:
    """The grader's ``on_fail`` is ``abort`` (``compile_suite`` marks it on
    the grader). After such a grader failed, the engine refuses every later
    call itself, so the rule judges only the call that failed the trace."""
    return str(getattr(grader, "on_fail", "")) == "abort"


#: Argument names read as the agent-independent views of ``_views``.
VIEWS: Final = frozenset({"command", "path", "url"})


def arg_values(call: ToolCall, key: str) -> list[str]:
    """The string values of argument ``key`` on ``call``: for ``command``,
    ``path`` and ``url`` the call's view (Claude Code's ``file_path``,
    every path of an ``apply_patch``, ...), else the argument itself."""
    if key in VIEWS:
        from trajgrade.graders.matching._views import view_of

        return view_of(call, key) or []
    value = (call.args or {}).get(key)
    return [value] if isinstance(value, str) and value else []


def call_label(call: ToolCall) -> str:
    """``call c1 to 'Bash'`` for messages."""
    return f"call {call.call_id or '?'} to {call.name!r}"
