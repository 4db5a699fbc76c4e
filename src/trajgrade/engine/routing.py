"""The engine's routes: which graders an event can concern, compiled once.

A suite is compiled into, per event type, the (grader index, handler)
pairs that declared the type, and, for ``tool_call`` events, per tool
*name*, from each grader's probed capabilities (``Suite.capabilities``,
trajgrade.graders.capabilities): a grader may narrow its route for a name with
``call_handler(name)`` (a cheaper handler, or None: this name can never
move its state), and its guard ruling with ``judges_call(name)`` (False:
``judge`` would answer None for every call of that name). One dict look-up
per call then stands for every grader's name match (the "fused" match).

Per trace, a grader whose handler answers :data:`~trajgrade.verdicts.SETTLED`
leaves the routes of that trace until a ``trace_start`` (which may bring
the dataset row it waits for) or the trace's end: its outcome no longer
depends on the events in between. Graders that judge calls or follow the
clock never leave (their ``judge``/``tick`` read the state).

None of this shows in results: tests/properties/test_routing.py compares
verdicts and guard decisions with a reference engine that hands every
event to every grader's ``step`` and every call to every ``judge``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from trajgrade.errors import GradeError
from trajgrade.events import EVENT_TYPES, PROJECTED, ToolCall
from trajgrade.verdicts import SETTLED, Decision, Outcome, grader_failed

if TYPE_CHECKING:
    from collections.abc import Sequence

    from trajgrade.graders import Grader
    from trajgrade.graders.capabilities import Capabilities

__all__ = ("Route", "Routes", "decide")

#: (grader index, handler) pairs, in suite order.
Route = tuple[tuple[int, Any], ...]

#: How many tool names get a cached route; a stream with more distinct
#: names (generated ones) computes the rest per call, memory stays bounded.
NAME_CACHE_MAX: Final = 4096


class Routes:
    """A suite's compiled routes (shared by every trace)."""

    __slots__ = (
        "_call_graders",
        "_judges",
        "by_name",
        "by_type",
        "judges",
        "judges_by_name",
        "parkable",
    )

    def __init__(
        self,
        graders: Sequence[Grader[Any]],
        capabilities: Sequence[Capabilities],
        judges: tuple[tuple[int, Any], ...],
    ) -> None:
        #: Per event type, every grader that declared it (its fast handler
        #: when it offers ``handlers``, else ``step``).
        self.by_type: dict[type[Any], Route] = {
            cls: tuple(
                (i, capabilities[i].handlers.get(cls, g.step))
                for i, g in enumerate(graders)
                if cls in g.event_types
            )
            for cls in EVENT_TYPES.values()
        }
        # A projected event (a result without its payload, ...) is routed
        # as the event it stands for.
        for lean, cls in PROJECTED.items():
            self.by_type[lean] = self.by_type[cls]
        #: (index, call_handler or None, default handler) of every grader
        #: routed ``tool_call``s.
        self._call_graders = tuple(
            (i, capabilities[i].call_handler, h) for i, h in self.by_type[ToolCall]
        )
        self.judges = judges
        #: (index, judges_call or None, judge) of every judge.
        self._judges = tuple((i, capabilities[i].judges_call, j) for i, j in judges)
        #: Per tool name: the graders a call of that name can move.
        self.by_name: dict[str, Route] = {}
        #: Per tool name: the judges that can rule on a call of that name.
        self.judges_by_name: dict[str, Route] = {}
        judging = {i for i, _ in judges}
        #: Graders that may leave a trace's routes once settled.
        self.parkable: frozenset[int] = frozenset(
            i for i, g in enumerate(graders) if i not in judging and not g.uses_clock
        )

    def call_route(self, name: str) -> Route:
        """The (index, handler) pairs for a ``tool_call`` named ``name``."""
        route = tuple(
            (i, h)
            for i, narrow, default in self._call_graders
            if (h := default if narrow is None else narrow(name)) is not None
        )
        if len(self.by_name) < NAME_CACHE_MAX:
            self.by_name[name] = route
        return route

    def call_judges(self, name: str) -> Route:
        """The (index, judge) pairs that can rule on a call named ``name``."""
        route = tuple(
            (i, j) for i, narrow, j in self._judges if narrow is None or narrow(name)
        )
        if len(self.judges_by_name) < NAME_CACHE_MAX:
            self.judges_by_name[name] = route
        return route


def decide(fn: Any, *args: Any) -> Decision | None:
    """A grader's answer outside the engine's hot loop (which has the same
    rules written out): a GradeError is an ``error`` decision, any other
    exception a grader bug (one error verdict, not a crash); SETTLED, which
    only the routed loop acts on, is nothing new."""
    try:
        d = fn(*args)
    except GradeError as exc:
        return Decision(outcome=Outcome.ERROR, score=0.0, evidence=exc.message)
    except Exception as exc:  # a grader bug: one error, not a crash
        return grader_failed(exc)
    return None if d is SETTLED else d
