"""AI GO! ``function_call_coverage``: were the required function calls made? (seed 004)

LatticeFlow AI GO! documents this scorer only by its outputs and a four-row
table (``shared/notes/upstream-semantics.md`` §5). Where it is silent the
decision is recorded here and in docs/semantics.md ("AI GO! function_call_coverage
decisions", §8.20):

* ``function_calls`` is a Jinja template over ``sample`` (the trace's dataset
  row), rendered with a sandboxed, *immutable* Jinja environment (attribute
  escapes such as ``''.__class__`` and mutations such as ``list.append`` are
  refused) and ``StrictUndefined`` (a missing sample field is an error naming
  it, not an empty list). The output is read as JSON, else as a Python literal
  (``ast.literal_eval``: Jinja prints a list as ``['a', 'b']``); it must be a
  list of strings, otherwise the trace gets an ``error`` verdict quoting the
  rendered text. Dataset values are data: they are never rendered as templates.
* A template that does not mention ``sample`` is rendered once when the config
  is compiled, so a bad hard-coded list is a config error. One that does is
  rendered once per trace: with the sample of the first ``trace_start`` that
  carries ``metadata.sample`` (the engine sends one for ``--dataset`` rows
  before the trace's first event), else with an empty sample at the first
  function call or at the end of the trace.
* The required list is a **multiset**: each entry is satisfied by its own
  call (``["search", "search"]`` needs two). ``num_required_calls_made``
  counts satisfied entries; ``num_unrequired_calls`` is every other call
  (calls to names not required, and calls beyond a name's required count).
  Counts ignore order in both modes; ``in_order`` only changes
  ``all_required_calls_made``, which then needs the list as a subsequence of
  the calls (other calls may come between).
* Names are compared exactly (case-sensitive). Arguments, outputs and whether
  a call completed do not matter: a ``tool_call`` event is a call.
* An empty list is vacuously satisfied (``all_required_calls_made`` 1) and its
  ``required_calls_coverage`` (0/0) is ``null``.
* score = ``all_required_calls_made``; the trace passes iff it is 1.

Streaming: coverage and the subsequence cursor only grow, so the outcome is
fixed (pass) at the call that completes them: a *sealed* verdict is emitted
then. Its score cannot change either, but ``num_unrequired_calls`` can, so
the final verdict, with all six outputs, comes at the end of the trace. A
fail is only known at the end (a later call could still complete the list).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any, Final

import msgspec

from trajgrade._util.depth import decode_bounded
from trajgrade.errors import ConfigError, GradeError, Location
from trajgrade.events import Event, ToolCall, TraceStart
from trajgrade.graders._spec import ConfigBase, ErrorList
from trajgrade.graders.matching.evidence import shown
from trajgrade.verdicts import Decision, Matched, Outcome

if TYPE_CHECKING:
    from jinja2 import Template

__all__ = (
    "FUNCTION_CALL_COVERAGE",
    "GRADER_TYPES",
    "CoverageState",
    "FunctionCallCoverage",
    "FunctionCallCoverageConfig",
    "parse_required",
)


class FunctionCallCoverageConfig(ConfigBase):
    """AI GO!'s scorer entry, minus ``type`` (and ``key``, which names it)."""

    function_calls: str
    #: ``any_order`` or ``in_order`` (checked at build, with a clearer
    #: message than a Literal's).
    mode: str = "any_order"
    #: AI GO!'s generic scorer fields: accepted so configs load unchanged.
    key: str | None = None
    purpose: str = "score"
    display_name: str | None = None
    metrics: list[Any] | None = None


class CoverageState(msgspec.Struct, array_like=True, gc=False):
    """Per-trace state: the rendered list and counters, nothing else."""

    #: The rendered required list; None until the sample is known.
    required: list[str] | None = None
    #: Required entries no call has satisfied yet, by name (zeros removed).
    missing: dict[str, int] = msgspec.field(default_factory=dict)
    calls: int = 0
    #: Required entries satisfied, each by its own call.
    made: int = 0
    #: in_order: entries matched so far as a subsequence of the calls.
    cursor: int = 0
    #: The sealed pass has been emitted.
    sealed: bool = False


def parse_required(text: str) -> list[str]:
    """A rendered template as a list of names: JSON first, then a Python literal.

    Raises ValueError quoting the text when it is neither a list of strings.
    """
    source = text.strip()
    value: Any
    try:
        value = decode_bounded(msgspec.json, source)
    except (msgspec.DecodeError, UnicodeDecodeError):
        try:
            value = ast.literal_eval(source)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            value = None
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    shown = source if len(source) <= 200 else source[:200] + "..."
    hint = (
        "; add `| list` after map(...)"
        if source.startswith("<generator")
        else "; it must be a JSON or Python list of strings"
    )
    msg = f"function_calls rendered {shown!r}, which is not a list of function names{hint}"
    raise ValueError(msg)


def _counts(names: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for n in names:
        out[n] = out.get(n, 0) + 1
    return out


class FunctionCallCoverage:
    """A compiled ``function_call_coverage`` scorer."""

    kind = "function_call_coverage"
    state_type = CoverageState
    uses_clock = False

    def __init__(self, config: FunctionCallCoverageConfig, *, name: str) -> None:
        self.name = name
        self._in_order = config.mode == "in_order"
        self._template, uses_sample = _compile(config.function_calls)
        self._uses_sample = uses_sample
        #: The list when the template does not depend on the sample.
        self._static: list[str] | None = None
        if not uses_sample:
            try:
                self._static = self._render({})
            except GradeError as exc:
                raise ConfigError(
                    exc.message, location=Location(field="function_calls")
                ) from None
        self._static_missing = _counts(self._static or [])
        #: Event type -> handler: the engine's fast path (same logic as step).
        self.handlers: dict[type[Any], Any] = {ToolCall: self._on_call}
        if uses_sample:
            self.handlers[TraceStart] = self._on_start
        self.event_types: frozenset[type[Event]] = frozenset(self.handlers)

    # ------------------------------------------------------------ contract
    def start(self) -> CoverageState:
        if self._static is None:
            return CoverageState()
        # The list itself is never mutated, so traces share it.
        return CoverageState(required=self._static, missing=dict(self._static_missing))

    def step(self, state: CoverageState, event: Event) -> Decision | None:
        handler = self.handlers.get(type(event))
        return None if handler is None else handler(state, event)

    def tick(self, state: CoverageState, *, elapsed: float) -> Decision | None:
        return None

    def finish(self, state: CoverageState) -> Decision:
        if state.required is None:
            self._fix(state, {})
        return self._decide(state, final=True)

    # ------------------------------------------------------------ events
    def _on_start(self, state: CoverageState, event: TraceStart) -> Decision | None:
        meta = event.metadata
        if state.required is not None or not meta or "sample" not in meta:
            return None
        self._fix(state, meta["sample"])
        return self._seal(state)

    def _on_call(self, state: CoverageState, call: ToolCall) -> Decision | None:
        if state.required is None:
            self._fix(state, {})
        state.calls += 1
        name = call.name
        missing = state.missing
        left = missing.get(name)
        if left:
            state.made += 1
            if left == 1:
                del missing[name]
            else:
                missing[name] = left - 1
        if self._in_order:
            required = state.required
            assert required is not None
            if state.cursor < len(required) and required[state.cursor] == name:
                state.cursor += 1
        return None if state.sealed else self._seal(state)

    # ------------------------------------------------------------ verdicts
    def _render(self, sample: Any) -> list[str]:
        from trajgrade.graders.aigo._template_limits import (
            render_bounded,  # Jinja, lazily
        )

        try:
            text = render_bounded(self._template, sample=sample)
        except Exception as exc:  # user template code: any failure is its error
            from jinja2.exceptions import SecurityError  # loaded with the template

            hint = ""
            if isinstance(exc, SecurityError):
                hint = " (refused by the template sandbox: read sample fields and use filters)"
            elif self._uses_sample and not sample:
                hint = " (no dataset row reached this trace; check --dataset and --dataset-key)"
            msg = f"function_calls template failed: {exc}{hint}"
            raise GradeError(msg) from None
        try:
            return parse_required(text)
        except ValueError as exc:
            raise GradeError(str(exc)) from None

    def _fix(self, state: CoverageState, sample: Any) -> None:
        required = self._render(sample)
        state.required = required
        state.missing = _counts(required)

    def _complete(self, state: CoverageState) -> bool:
        required = state.required
        assert required is not None
        if self._in_order:
            return state.cursor == len(required)
        return state.made == len(required)

    def _seal(self, state: CoverageState) -> Decision | None:
        if not self._complete(state):
            return None
        state.sealed = True
        return self._decide(state, final=False)

    def _decide(self, state: CoverageState, *, final: bool) -> Decision:
        required = state.required
        assert required is not None
        total = len(required)
        made = state.made
        done = self._complete(state)
        unrequired = state.calls - made
        outputs: dict[str, Any] = {
            "all_required_calls_made": 1.0 if done else 0.0,
            "required_calls_coverage": made / total if total else None,
            "num_required_calls_made": made,
            "num_required_calls_not_made": total - made,
            "num_unrequired_calls": unrequired,
            "num_required_calls_total": total,
        }
        # A sealed verdict's unrequired count can still grow.
        extra = f"; {unrequired} unrequired call(s){'' if final else ' so far'}"
        matched: Matched | None = None
        if not total:
            text = f"no calls are required (the list is empty){extra}"
        elif done:
            order = " in order" if self._in_order else ""
            text = f"all {total} required call(s) made{order}{extra}"
        elif made < total:
            lost = ", ".join(
                f"{n!r}" if k == 1 else f"{n!r} x{k}" for n, k in state.missing.items()
            )
            text = f"{made} of {total} required call(s) made; not made: {lost}{extra}"
            matched = Matched(
                rule="required_calls", field="not_made", value=shown(lost)
            )
            if self._in_order:
                text += f"; {state.cursor} of {total} in order"
        else:
            text = (
                f"all {total} required call(s) made, but only {state.cursor} of {total} "
                f"in order; next expected {required[state.cursor]!r}{extra}"
            )
            matched = Matched(
                rule="in_order",
                field="next_expected",
                value=shown(str(required[state.cursor])),
            )
        return Decision(
            outcome=Outcome.PASS if done else Outcome.FAIL,
            score=1.0 if done else 0.0,
            final=final,
            evidence=text,
            metadata=outputs,
            matched=matched,
        )


def _compile(source: str) -> tuple[Template, bool]:
    """The compiled template and whether it reads ``sample``."""
    # Imported here so that runs without this grader do not load Jinja.
    from jinja2 import StrictUndefined, TemplateSyntaxError, meta

    from trajgrade.graders.aigo._template_limits import BoundedSandbox

    env = BoundedSandbox(undefined=StrictUndefined, autoescape=False)
    where = Location(field="function_calls")
    try:
        tree = env.parse(source)
    except TemplateSyntaxError as exc:
        msg = f"not a valid Jinja template: {exc.message} (template line {exc.lineno}); fix the template"
        raise ConfigError(msg, location=where) from None
    names = meta.find_undeclared_variables(tree)
    unknown = sorted(names - {"sample"})
    if unknown:
        msg = f"the template uses {', '.join(unknown)}, but only `sample` (the dataset row) is defined"
        raise ConfigError(msg, location=where)
    return env.from_string(tree), "sample" in names


class _FunctionCallCoverageType:
    kind = "function_call_coverage"
    summary = "AI GO!: were the required function calls made (any order or in order); Jinja template over the dataset row"
    origin = "aigo"
    config_type = FunctionCallCoverageConfig

    def build(
        self, config: FunctionCallCoverageConfig, *, name: str, context: Any
    ) -> FunctionCallCoverage:
        errors = ErrorList()
        for field, value, allowed in (
            ("mode", config.mode, ("any_order", "in_order")),
            ("purpose", config.purpose, ("score", "qa")),
        ):
            if value not in allowed:
                errors.add(
                    field, f"{field} must be {' or '.join(allowed)} (got {value!r})"
                )
        grader: FunctionCallCoverage | None = None
        try:
            grader = FunctionCallCoverage(config, name=name)
        except ConfigError as exc:
            errors.errors.append(exc)
        errors.raise_if_any()
        assert grader is not None
        if config.metrics:
            context.warn(
                "metrics",
                "metrics are aggregated per task by AI GO!; trajgrade reports per-trace "
                "verdicts and ignores them (aggregate the verdict stream instead)",
            )
        return grader


FUNCTION_CALL_COVERAGE: Final = _FunctionCallCoverageType()

#: What this module contributes to the registry.
GRADER_TYPES: Final = (FUNCTION_CALL_COVERAGE,)
