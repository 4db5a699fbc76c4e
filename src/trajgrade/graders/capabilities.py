"""What a grader may offer beyond the :class:`~trajgrade.graders.Grader`
protocol, and the record of what one compiled grader offers.

Each optional capability is one small Protocol below, documented with its
*default*: what the engine does for a grader that does not offer it (a
third-party plugin offering none of them gets every default and grades
correctly). A :class:`~trajgrade.config.model.Suite` probes its graders
once, when it is built (:meth:`Capabilities.of`), and keeps one record per
grader (``Suite.capabilities``): the engine, the hooks and ``trajgrade
check --agent`` read the record, never the grader's attributes. The probe
is the same for built-in graders, guard rules and plugins.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, NamedTuple, Protocol, TypeVar

from trajgrade.events import Projection, ToolResult, Usage

if TYPE_CHECKING:
    from trajgrade.events import Event, ToolCall
    from trajgrade.graders.matching._tool_match import Matcher
    from trajgrade.verdicts import Decision, Judgement

__all__ = (
    "Aliased",
    "Capabilities",
    "Deadlined",
    "ExposesBindings",
    "ExposesMatchers",
    "Judges",
    "NarrowsCalls",
    "NarrowsJudging",
    "PacksState",
    "ReadsResults",
    "RoutedHandlers",
    "projection",
    "reads_tool_results",
)

S_contra = TypeVar("S_contra", contravariant=True)

#: A step function for one event type: ``handler(state, event)``.
Handler = Callable[[Any, Any], "Decision | None"]


class Deadlined(Protocol[S_contra]):
    """A clock-driven grader (``uses_clock``) that says when its ``tick``
    may next decide something.

    ``deadline(state)``: the earliest elapsed seconds (since the trace
    opened) at which ``tick`` may decide something, None for never; early
    is allowed, late is not, and events may only move it later. The engine
    then ticks a trace only when it is due (trajgrade.engine.clock).

    Default (no callable ``deadline``): every open trace is ticked on every
    tick, and the suite's idle traces are never packed."""

    def deadline(self, state: S_contra) -> float | None: ...


class Judges(Protocol[S_contra]):
    """A grader that guards calls (see :class:`~trajgrade.verdicts.Judgement`).

    ``judge(state, call)``: called for every ``tool_call`` after ``step``
    saw it, with ``state`` None once the grader's verdict is final; None
    means no ruling on this call.

    Default (no callable ``judge``): the grader gives one guard decision, for
    the call at which its first non-pass verdict was decided."""

    def judge(self, state: S_contra | None, call: ToolCall) -> Judgement | None: ...


class NarrowsJudging(Protocol):
    """A judging grader that knows, from a tool's name alone, that it has no
    ruling on that tool's calls.

    ``judges_call(name)``: False when ``judge`` would answer None for every
    call named ``name`` (the engine then does not ask it).

    Default (absent): ``judge`` is asked about every call."""

    def judges_call(self, name: str) -> bool: ...


class RoutedHandlers(Protocol):
    """A grader with one step function per event type.

    ``handlers``: event class -> ``handler(state, event)``, which the engine
    calls instead of ``step`` for events of that class (same answers as
    ``step``, without its dispatch on the type).

    Default (absent): ``step`` for every type in ``event_types``."""

    handlers: Mapping[type[Event], Handler]


class NarrowsCalls(Protocol):
    """A grader whose handling of a ``tool_call`` depends on the tool's name.

    ``call_handler(name)``: the handler for calls named ``name`` (a cheaper
    one, or None: a call of that name can never move the state, so it is
    not handed to the grader).

    Default (absent): every call goes to the ``tool_call`` handler (see
    :class:`RoutedHandlers`), or to ``step``."""

    def call_handler(self, name: str) -> Handler | None: ...


class ReadsResults(Protocol):
    """A grader that routes ``tool_result`` events but may not read their
    payload.

    ``reads_result``: False when it never reads ``ToolResult.result`` (the
    decoders may then leave it unbuilt, trajgrade.events).

    Default (absent): True, every grader that routes tool results reads
    them."""

    reads_result: bool


class PacksState(Protocol):
    """A grader whose per-trace state round-trips through msgpack exactly.

    ``packs_state``: True lets the engine pack the states of idle traces
    (trajgrade.engine.packing).

    Default (absent): True for trajgrade's own graders (tested), False for
    any other (a plugin's state need round-trip only for ``--state``)."""

    packs_state: bool


class ExposesMatchers(Protocol):
    """A grader that matches tool calls with
    :class:`~trajgrade.graders.matching._tool_match.Matcher`s.

    ``matchers()``: every matcher, so ``trajgrade check --agent`` can warn of
    those that can never work on an agent.

    Default (absent): no matcher is checked."""

    def matchers(self) -> Iterable[Matcher]: ...


class ExposesBindings(Protocol):
    """A grader whose options name tool arguments (``flow``'s ``bind``).

    ``bindings()``: (option, argument, matcher) triples, so ``trajgrade
    check --agent`` can warn of an argument none of the matched tools takes.

    Default (absent): no binding is checked."""

    def bindings(self) -> Iterable[tuple[str, str, Matcher]]: ...


class Aliased(Protocol):
    """A grader *type* (not a grader) known by more config ``type`` strings.

    ``aliases``: the other names (``tool-trajectory`` for
    ``tool_trajectory``); only built-in types' aliases are registered.

    Default (absent): the type is known by its ``kind`` alone."""

    aliases: tuple[str, ...]


#: ``handlers`` of a grader that has none: ``step`` for every type.
NO_HANDLERS: Final[Mapping[type[Any], Handler]] = {}


class Capabilities(NamedTuple):
    """What one compiled grader offers of the optional capabilities, probed
    once (:meth:`of`); each field holds the default when it offers none.
    (Immutable, like the Suite that keeps it.)"""

    #: :class:`RoutedHandlers` (or :data:`NO_HANDLERS`).
    handlers: Mapping[type[Any], Handler]
    #: :class:`NarrowsCalls`, or None.
    call_handler: Callable[[str], Handler | None] | None
    #: :class:`Judges` (the bound method), or None when it is absent or not
    #: callable.
    judge: Callable[[Any, ToolCall], Judgement | None] | None
    #: :class:`NarrowsJudging`, or None.
    judges_call: Callable[[str], bool] | None
    #: :class:`Deadlined` (the bound method), or None when it is absent or
    #: not callable.
    deadline: Callable[[Any], float | None] | None
    #: The grader routes ``tool_result`` events and reads their payload
    #: (:class:`ReadsResults`).
    reads_results: bool
    #: :class:`PacksState`, with its default applied.
    packs_state: bool
    #: :class:`ExposesMatchers`, or None.
    matchers: Callable[[], Iterable[Matcher]] | None
    #: :class:`ExposesBindings`, or None.
    bindings: Callable[[], Iterable[tuple[str, str, Matcher]]] | None

    @classmethod
    def of(cls, grader: Any) -> Capabilities:
        """Probe ``grader`` (the one place the optional capabilities are
        looked up). An attribute that is there but unusable is kept as it
        is, so it fails where it is used, as it always did; only ``judge``
        and ``deadline`` count as offered when they are callable."""
        judge = getattr(grader, "judge", None)
        deadline = getattr(grader, "deadline", None)
        builtin = type(grader).__module__.startswith("trajgrade.")
        return cls(
            handlers=getattr(grader, "handlers", NO_HANDLERS),
            call_handler=getattr(grader, "call_handler", None),
            judge=judge if callable(judge) else None,
            judges_call=getattr(grader, "judges_call", None),
            deadline=deadline if callable(deadline) else None,
            reads_results=bool(
                ToolResult in grader.event_types
                and getattr(grader, "reads_result", True)
            ),
            packs_state=bool(getattr(grader, "packs_state", builtin)),
            matchers=getattr(grader, "matchers", None),
            bindings=getattr(grader, "bindings", None),
        )


def projection(
    graders: Iterable[Any], capabilities: Iterable[Capabilities]
) -> Projection:
    """What the decoders must build for these graders (a suite's, with
    their ``capabilities`` by index): results' payloads when one reads them,
    usage's folded counts when one routes usage."""
    return Projection(
        tool_results=reads_tool_results(capabilities),
        usage=any(Usage in g.event_types for g in graders),
    )


def reads_tool_results(capabilities: Iterable[Capabilities]) -> bool:
    """Whether any grader can read ``ToolResult.result`` (pass
    ``Suite.capabilities``)."""
    return any(c.reads_results for c in capabilities)
