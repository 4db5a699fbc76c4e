"""``loop``: the same tool call made again and again, or two calls taking
turns, judged call by call.

Semantics (docs/rules.md, "loop"):

* Two calls are *the same* when their fingerprints are equal: the tool name
  and the arguments as canonical JSON (keys sorted; the raw argument text
  when the arguments are not an object). Call ids and times do not count.
  ``same: name`` compares tool names only: "the same tool n times in a row,
  whatever the arguments" (``same: call``, the default, is the above).
* ``repeats: n``: the call that makes ``n`` identical calls in a row is a
  violation, and so is every further identical call in that run. With
  ``within: w``, identical calls need not be consecutive: the call that makes
  ``n`` identical calls among the last ``w`` calls (itself included) is one.
* ``ping_pong: n``: the call that makes the last ``n`` calls alternate
  between exactly two different calls (A B A B …) is a violation, and so is
  every further call that continues the alternation, and the refused call
  made again at once (it neither counts as a step nor breaks the run).
* ``match`` restricts the rule to matching calls; other calls are invisible
  to it (they neither count nor break a run).
* A refused call still counts: an agent that retries the refused call stays
  in its loop. The trace fails at the first violation (sealed) and stays open
  so every later call is judged. State: at most ``within`` fingerprints.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Final, Literal

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
    fingerprint,
    matches,
)
from trajgrade.verdicts import Decision, Judgement, Matched, Outcome

if TYPE_CHECKING:
    from trajgrade.graders.matching._tool_match import Matcher

__all__ = ("GRADER_TYPES", "MAX_WITHIN", "Loop", "LoopConfig", "LoopState")

#: The largest ``within`` (the state holds that many fingerprints).
MAX_WITHIN: Final = 1000


class LoopConfig(ConfigBase):
    """``{repeats?, within?, ping_pong?, match?, same?}``: repeats or ping_pong."""

    repeats: Annotated[int, msgspec.Meta(ge=2)] | None = None
    within: Annotated[int, msgspec.Meta(ge=2, le=MAX_WITHIN)] | None = None
    ping_pong: Annotated[int, msgspec.Meta(ge=4)] | None = None
    match: MatcherSpec | None = None
    #: What makes two calls the same: the whole call (name and arguments),
    #: or the tool's name alone.
    same: Literal["call", "name"] = "call"


class LoopState(msgspec.Struct, array_like=True, gc=False):
    """The last fingerprints and run lengths; the latest call's ruling."""

    #: ``within``: fingerprints of the last ``within`` calls, oldest first.
    recent: list[int] = msgspec.field(default_factory=list)
    last: int = 0
    prev: int = 0
    #: Identical calls in a row ending with the latest one.
    run: int = 0
    #: Length of the alternating (A B A B …) run ending with the latest call.
    alt: int = 0
    calls: int = 0
    violations: int = 0
    first: str = ""
    #: (rule, reason) of the latest call when it is a violation.
    hit: tuple[str, str] | None = None
    #: Why the latest call could not be judged ("": it could); how many
    #: events could not be, and the first reason.
    error: str = ""
    errors: int = 0
    first_error: str = ""
    #: The latest call completed an alternation (ping_pong).
    pinged: bool = False
    #: What the first violating call matched (the final verdict names it).
    first_matched: Matched | None = None


class Loop(CallRule):
    """The compiled ``loop`` grader."""

    kind: Final = "loop"
    state_type = LoopState
    event_types: frozenset[type[Event]] = frozenset({ToolCall})

    def __init__(self, config: LoopConfig, *, name: str, timeout: float) -> None:
        self.name = name
        errors = ErrorList()
        if config.repeats is None and config.ping_pong is None:
            errors.add(
                "repeats", "give repeats (same call n times), ping_pong, or both"
            )
        if config.within is not None:
            if config.repeats is None:
                errors.add("within", "within applies to repeats; give repeats too")
            elif config.within < config.repeats:
                errors.add(
                    "within",
                    f"within ({config.within}) must be at least repeats ({config.repeats}): "
                    "fewer calls cannot hold that many repeats",
                )
        matcher: Matcher | None = None
        if config.match is not None:
            matcher = compile_matcher(config.match, "match", timeout, errors)
        errors.raise_if_any()
        self._match = matcher
        self._repeats = config.repeats
        self._within = config.within
        self._ping_pong = config.ping_pong
        self._by_name = config.same == "name"
        #: How the reasons name what repeats.
        self._what = "the same tool" if self._by_name else "the same call"
        self._pair = "tools" if self._by_name else "calls"
        self.handlers: dict[type[Any], Any] = {ToolCall: self._on_call}

    def start(self) -> LoopState:
        return LoopState()

    def judge(self, state: LoopState | None, call: ToolCall) -> Judgement | None:
        if state is None:
            return None
        if state.hit is None:
            return error_ruling(self.kind, state, self)
        if state.violations > 1 and aborts(self):
            return None  # the run was aborted at the first violation
        rule, reason = state.hit
        return Judgement(rule=rule, reason=reason, matched=call_matched(rule, call))

    def finish(self, state: LoopState) -> Decision:
        meta = {"calls": state.calls, "violations": state.violations}
        if state.violations:
            more = (
                f" ({state.violations} looping calls in all)"
                if state.violations > 1
                else ""
            )
            return Decision(
                outcome=Outcome.FAIL,
                score=0.0,
                evidence=state.first + more,
                metadata=meta,
                matched=state.first_matched,
            )
        if state.errors:
            return error_decision(state)
        return Decision(
            outcome=Outcome.PASS,
            score=1.0,
            evidence=f"no loop in {state.calls} call(s)",
            metadata=meta,
        )

    def _on_call(self, state: LoopState, call: ToolCall) -> Decision | None:
        state.hit = None
        state.error = ""
        try:
            if self._match is not None and not matches(self._match, call):
                return None
        except GradeError as exc:
            could_not_judge(state, exc)  # (unseen: it neither counts nor breaks a run)
            return None
        fp = fingerprint(call, name_only=self._by_name)
        n = state.calls
        state.calls = n + 1
        # Runs of identical and of alternating calls ending here.
        if n and fp == state.last:
            state.run += 1
            if not state.pinged:
                state.alt = 1
                state.prev = fp
            # (Else the call just refused for alternating, made again: still
            # that step of the alternation, refused again, and A B A B B A
            # goes on.)
        else:
            state.alt = (
                state.alt + 1
                if n >= 2 and fp == state.prev and state.alt >= 2
                else (2 if n else 1)
            )
            state.run = 1
            state.prev, state.last = state.last, fp
        pinged = self._ping_pong is not None and state.alt >= self._ping_pong
        state.pinged = pinged
        hit: tuple[str, str] | None = None
        repeats = self._repeats
        if repeats is not None:
            within = self._within
            if within is None:
                if state.run >= repeats:
                    hit = (
                        "repeats",
                        f"{self._said(call)} is {self._what} {state.run} times in a row (repeats: {repeats})",
                    )
            else:
                recent = state.recent
                recent.append(fp)
                if len(recent) > within:
                    del recent[0]
                same = recent.count(fp)
                if same >= repeats:
                    hit = (
                        "repeats",
                        f"{self._said(call)} is {self._what} {same} times in the last {len(recent)} calls (repeats: {repeats} within {within})",
                    )
        if hit is None and pinged:
            hit = (
                "ping_pong",
                f"{self._said(call)} makes the last {state.alt} calls alternate between two {self._pair} (ping_pong: {self._ping_pong})",
            )
        if hit is None:
            return None
        return self._record(state, hit, call)

    @staticmethod
    def _said(call: ToolCall) -> str:
        """The call in words, with what it does (its command, its path)."""
        return described(call_matched("", call))

    @staticmethod
    def _record(
        state: LoopState, hit: tuple[str, str], call: ToolCall
    ) -> Decision | None:
        """Count a looping call; the first one fails the trace (sealed), the
        rest are only judged."""
        state.hit = hit
        state.violations += 1
        if state.violations > 1:
            return None
        state.first = hit[1]
        state.first_matched = call_matched(hit[0], call)
        return Decision(
            outcome=Outcome.FAIL,
            score=0.0,
            final=False,
            evidence=hit[1],
            metadata={"violated": hit[0]},
            matched=state.first_matched,
        )


class _LoopType:
    kind = "loop"
    summary = "trajgrade: the same call repeated n times (in a row or within the last w calls) or two calls alternating; judges each call"
    origin = "trajgrade"
    config_type = LoopConfig

    def build(self, config: LoopConfig, *, name: str, context: Any) -> Loop:
        return Loop(config, name=name, timeout=context.regex_timeout)


#: What this module contributes to the registry.
GRADER_TYPES: Final = (_LoopType(),)
