"""letta-evals ``kind: tool`` graders: an extractor, then a grading function.

Semantics are letta-evals 0.26's (``graders/base.py``, ``graders/tool.py``,
``execution/grading.py``), pinned by the conformance cases:

* No Letta message at all (every turn empty) → score 0, rationale
  ``Empty trajectory - agent produced no messages``, submission ``""``.
  Otherwise the extractor runs; an empty submission → score 0, ``Empty
  submission - extractor found no content``, and the function is not called.
  Otherwise the function's score, rationale and metadata, plus
  ``extraction_time`` (always 0.0: the core reads no clock; absent after an
  empty trajectory or submission, as upstream).
* The dataset row (``trace_start`` ``metadata.sample``: the engine's
  ``--dataset`` row, or one in the log) is letta's Sample; the first row a
  trace gets is its row. Its validation errors (``ground_truth cannot be a
  list when input is a string``, ``input has N items but ground_truth has M
  items…``) concern one sample, so they are that trace's ``error`` verdict.
  Without a row the sample is empty: functions that need ``ground_truth``
  say ``No ground_truth answer provided``. ``agent_state`` (``memory_block``)
  is the trace's own (``trace_start`` ``metadata.agent_state``, from
  letta-evals result files) or else the row's.
* Per-turn grading (§8.17): when ``input`` and ``ground_truth`` are both
  lists, turn *i* is graded alone against ``ground_truth[i]`` and the score is
  the mean; a missing turn is an empty trajectory, extra turns are ignored.
  Turns are delimited by ``turn_start`` events (the Letta adapter emits one
  per turn list); events before the first ``turn_start`` belong to turn 0,
  which the first ``turn_start`` also opens (as for vally steps). A row that
  asks for per-turn grading after the trace's first event is an error.
  Metadata: ``turns_passed`` (score ≥ 1.0), ``turns_total``,
  ``per_turn_scores``, ``per_turn_grades``; rationale ``"2/3 passed: ✓ ✗ ✓"``;
  submission ``"[Turn 0] … | [Turn 1] …"``.
* Pass (§8.16): score ≥ ``pass_threshold``, default 1.0, letta-evals'
  per-sample threshold (``pass_threshold`` is a trajgrade extension; the
  CLI's ``--threshold`` is agentv's and does not apply).
* Errors (a regex timeout, user code that raises or returns a bad score, a
  missing agent_state) are ``error`` verdicts, never a pass.

Streaming: ``first_assistant``, ``tool_arguments`` and ``tool_output`` are
final at their first find, and the verdict is given then if the sample is
known (else when it arrives). In per-turn mode the verdict is final once
every graded turn is closed (its extractor is done, or the next
``turn_start`` arrived). Everything else is decided at the end of the trace.
An early verdict is the end-of-trace one: after it nothing the grader reads
can change (the property test in ``tests/graders/test_letta_tool.py`` checks
this against a whole-trace reference).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Final

import msgspec

from trajgrade.errors import GradeError
from trajgrade.events import (
    Event,
    Message,
    ToolCall,
    ToolResult,
    TraceStart,
    TurnStart,
)
from trajgrade.graders._spec import ConfigBase, ErrorList
from trajgrade.graders.letta._compile import compile_extractor, compile_function
from trajgrade.graders.letta._extract import Extractor, Slot
from trajgrade.graders.letta._functions import (
    EMPTY_SUBMISSION,
    EMPTY_TRAJECTORY,
    GradeResult,
    Sample,
    call_function,
    extractor,
    grader,
    is_per_turn,
    sample_problem,
)
from trajgrade.graders.matching.evidence import shown
from trajgrade.verdicts import SETTLED, Decision, Matched, Outcome, Settled

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = (
    "GRADER_TYPES",
    "LETTA_TOOL",
    "GradeResult",
    "LettaTool",
    "LettaToolConfig",
    "LettaToolState",
    "Sample",
    "TurnGrade",
    "extractor",
    "grader",
)


class LettaToolConfig(ConfigBase):
    """letta-evals' ToolGraderSpec (``kind`` is consumed by the suite layout)."""

    function: str
    extractor: str = "last_assistant"
    extractor_config: dict[str, Any] | None = None
    display_name: str | None = None
    #: trajgrade extension: the score at or above which the trace passes.
    pass_threshold: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)] = 1.0


class TurnGrade(msgspec.Struct, array_like=True, gc=False):
    """One graded turn (per-turn mode)."""

    score: float
    rationale: str | None
    submission: str


class LettaToolState(msgspec.Struct, array_like=True, gc=False):
    """Per-trace state: the sample, extraction progress, graded turns."""

    slot: Slot = msgspec.field(default_factory=Slot)
    sample: dict[str, Any] | None = None
    #: The trace's own agent state, when its format carries one.
    agent_state: Any = None
    #: A turn_start or a message was seen: the grading mode is fixed.
    started: bool = False
    per_turn: bool = False
    #: Per-turn mode: how many turns are graded (len of ground_truth).
    total: int = 0
    #: turn_start events seen.
    turns: int = 0
    #: Shared _NO_GRADES until per-turn mode is known (per-trace memory).
    graded: list[TurnGrade] = msgspec.field(default_factory=list)


_Result = tuple[float, str | None, dict[str, Any]]
#: ``graded`` of every state in whole-trace mode (never written there;
#: tests/properties/test_routing.py checks it stays empty).
_NO_GRADES: Final[list[TurnGrade]] = []


class LettaTool:
    """The compiled ``letta-tool`` grader."""

    kind: Final = "letta-tool"
    state_type = LettaToolState
    uses_clock = False

    def __init__(
        self,
        *,
        name: str,
        function: Callable[[Sample, str], Any],
        function_label: str,
        extractor: Extractor,
        threshold: float,
        display_name: str | None,
    ) -> None:
        self.name = name
        self._function = function
        self._label = function_label
        self._extractor = extractor
        self._threshold = threshold
        self._display = display_name
        #: Event type -> handler: the engine's fast path (same logic as step).
        #: Only extractors with a ``result`` hook read a tool's return.
        self.reads_result = type(extractor).result is not Extractor.result
        # Events the extractor ignores only mark the scope as having content.
        ignored = self._on_ignored
        self.handlers: dict[type[Any], Any] = {
            TraceStart: self._on_start,
            TurnStart: self._on_turn,
            Message: self._on_content if extractor.reads_messages() else ignored,
            ToolCall: self._on_content,
            ToolResult: self._on_content if self.reads_result else ignored,
        }
        self.event_types: frozenset[type[Event]] = frozenset(self.handlers)
        #: Once a whole-trace extraction is done, only trace_start can
        #: change the outcome (the extractor ignores new turns): its
        #: handlers say SETTLED and the engine stops routing content here.
        self._settles = type(extractor).turn is Extractor.turn

    # ------------------------------------------------------------ contract
    def start(self) -> LettaToolState:
        return LettaToolState(graded=_NO_GRADES)

    def step(self, state: LettaToolState, event: Event) -> Decision | None:
        handler = self.handlers.get(type(event))
        d = None if handler is None else handler(state, event)
        return None if d is SETTLED else d

    def tick(self, state: LettaToolState, *, elapsed: float) -> Decision | None:
        return None

    def finish(self, state: LettaToolState) -> Decision:
        row = state.sample or {}
        if not state.per_turn:
            return self._whole(state, row)
        if len(state.graded) < state.total and len(state.graded) == self._turn(state):
            self._grade_turn(state, row)
        while len(state.graded) < state.total:
            state.graded.append(TurnGrade(0.0, EMPTY_TRAJECTORY, ""))
        return self._per_turn_decision(state)

    def call_handler(self, name: str) -> Any:
        """The engine's route for calls named ``name`` (trajgrade.engine.routing)."""
        return (
            self._on_content if self._extractor.reads_call(name) else self._on_ignored
        )

    # ------------------------------------------------------------ events
    def _on_start(self, state: LettaToolState, event: TraceStart) -> Decision | None:
        meta = event.metadata or {}
        if "agent_state" in meta:
            state.agent_state = meta["agent_state"]
        row = meta.get("sample")
        if row is None or state.sample is not None:
            return None
        if not isinstance(row, Mapping):
            msg = f"the trace's dataset row is a {type(row).__name__}, not an object"
            raise GradeError(msg)
        problem = sample_problem(row)
        if problem is not None:
            raise GradeError(problem)
        per_turn = is_per_turn(row)
        if state.started and per_turn:
            msg = "the dataset row asks for per-turn grading (list input and ground_truth) but arrived after the trace's first event; send trace_start with metadata.sample first"
            raise GradeError(msg)
        state.sample = dict(row)
        state.per_turn = per_turn
        if per_turn:
            state.graded = []  # its own: per-turn mode appends
            state.total = len(row["ground_truth"])
            return self._per_turn_early(state)
        return self._whole(state, state.sample) if state.slot.done else None

    def _turn(self, state: LettaToolState) -> int:
        """The index of the turn the next message belongs to."""
        return state.turns - 1 if state.turns else 0

    def _on_turn(
        self, state: LettaToolState, event: TurnStart
    ) -> Decision | Settled | None:
        state.started = True
        state.turns += 1
        if state.turns == 1:
            return None  # the first turn_start opens turn 0
        if not state.per_turn:
            if state.slot.done and self._settles:
                return SETTLED
            self._extractor.turn(state.slot)
            return None
        closing = state.turns - 2
        if closing == len(state.graded) and closing < state.total:
            self._grade_turn(state, state.sample or {})
        state.slot = Slot()
        return self._per_turn_early(state)

    def _on_content(
        self, state: LettaToolState, event: Message | ToolCall | ToolResult
    ) -> Decision | Settled | None:
        state.started = True
        slot = state.slot
        if state.per_turn:
            turn = self._turn(state)
            if turn >= state.total or turn < len(state.graded):
                return None  # a turn past the ground truths, or one already graded
        elif slot.done:
            return SETTLED if self._settles else None
        slot.content = True
        x = self._extractor
        if isinstance(event, Message):
            x.message(slot, event)
        elif isinstance(event, ToolCall):
            x.call(slot, event)
        else:
            x.result(slot, event)
        if not slot.done:
            return None
        if state.sample is None:
            # Extracted; only a dataset row (trace_start) can still matter.
            return None if state.per_turn or not self._settles else SETTLED
        if state.per_turn:
            self._grade_turn(state, state.sample)
            return self._per_turn_early(state)
        return self._whole(state, state.sample)

    def _on_ignored(
        self, state: LettaToolState, event: Message | ToolCall | ToolResult
    ) -> Decision | Settled | None:
        # _on_content for an event the extractor's hooks leave alone: the
        # same effects, without the hook dispatch (the common case: a
        # tool_arguments extraction waiting for its tool).
        if state.per_turn or state.slot.done:
            return self._on_content(state, event)
        state.started = True
        state.slot.content = True
        return None

    # ------------------------------------------------------------ grading
    def _grade(
        self, row: Mapping[str, Any], slot: Slot, agent_state: Any
    ) -> tuple[_Result, str]:
        """letta's Grader.grade on one scope: (result, submission)."""
        if not slot.content:
            return (0.0, EMPTY_TRAJECTORY, {}), ""
        submission = self._extractor.value(slot, agent_state)
        if not submission:
            return (0.0, EMPTY_SUBMISSION, {}), ""
        score, rationale, meta = call_function(
            self._function, self._label, row, submission
        )
        meta["extraction_time"] = 0.0
        return (score, rationale, meta), submission

    def _agent_state(self, state: LettaToolState, row: Mapping[str, Any]) -> Any:
        return (
            state.agent_state
            if state.agent_state is not None
            else row.get("agent_state")
        )

    def _whole(self, state: LettaToolState, row: Mapping[str, Any]) -> Decision:
        (score, rationale, meta), submission = self._grade(
            row, state.slot, self._agent_state(state, row)
        )
        return self._decide(score, rationale, submission, meta)

    def _grade_turn(self, state: LettaToolState, row: Mapping[str, Any]) -> None:
        i = len(state.graded)
        turn_row = {
            **row,
            "input": row["input"][i],
            "ground_truth": row["ground_truth"][i],
        }
        (score, rationale, _), submission = self._grade(
            turn_row, state.slot, self._agent_state(state, row)
        )
        state.graded.append(TurnGrade(score, rationale, submission))

    def _per_turn_early(self, state: LettaToolState) -> Decision | None:
        done = len(state.graded) >= state.total
        return self._per_turn_decision(state) if done else None

    def _per_turn_decision(self, state: LettaToolState) -> Decision:
        grades = state.graded
        scores = [g.score for g in grades]
        passed = sum(1 for s in scores if s >= 1.0)
        symbols = " ".join("✓" if s >= 1.0 else "✗" for s in scores)
        meta = {
            "turns_passed": passed,
            "turns_total": len(scores),
            "extraction_time": 0.0,
            "per_turn_scores": scores,
            "per_turn_grades": [
                {
                    "turn": i,
                    "score": g.score,
                    "rationale": g.rationale,
                    "submission": g.submission,
                }
                for i, g in enumerate(grades)
            ],
        }
        return self._decide(
            sum(scores) / len(scores) if scores else 0.0,
            f"{passed}/{len(scores)} passed: {symbols}",
            " | ".join(f"[Turn {i}] {g.submission}" for i, g in enumerate(grades)),
            meta,
        )

    def _decide(
        self, score: float, rationale: str | None, submission: str, meta: dict[str, Any]
    ) -> Decision:
        meta = {**meta, "submission": submission, "rationale": rationale}
        if self._display is not None:
            meta["display_name"] = self._display
        passed = score >= self._threshold
        return Decision(
            outcome=Outcome.PASS if passed else Outcome.FAIL,
            score=score,
            # (The rationale is letta-evals' own text: the conformance cases'.)
            evidence=rationale or "",
            metadata=meta,
            # What failed: the submission graded (redaction costs a scan: only
            # on a fail).
            matched=None
            if passed
            else Matched(rule=self._label, field="submission", value=shown(submission)),
        )


class _LettaToolType:
    kind = "letta-tool"
    summary = "letta-evals: extractor (last_assistant, tool_arguments, …) + function (exact_match, contains, regex_match, …)"
    origin = "letta-evals"
    config_type = LettaToolConfig

    def build(self, config: LettaToolConfig, *, name: str, context: Any) -> LettaTool:
        errors = ErrorList()
        options = dict(config.extractor_config or {})
        x = compile_extractor(config.extractor, options, errors, context)
        function = compile_function(config.function, errors, context)
        errors.raise_if_any()
        assert x is not None
        assert function is not None
        return LettaTool(
            name=name,
            function=function,
            function_label=config.function,
            extractor=x,
            threshold=config.pass_threshold,
            display_name=config.display_name,
        )


LETTA_TOOL: Final = _LettaToolType()

#: What this module contributes to the registry.
GRADER_TYPES: Final = (LETTA_TOOL,)
