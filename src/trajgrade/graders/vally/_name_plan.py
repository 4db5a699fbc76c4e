"""Which entries of a ``tool-calls`` grader one tool name can match.

Entry names are regular expressions, so whether an entry can match a call
is decided by its tool name alone before any argument is looked at. A plan
is computed once per distinct name (memoised by the grader, at most
:data:`PLAN_CACHE_MAX` names) and is what the grader's hot path and the
engine's routes (``ToolCalls.call_handler``) read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Sequence

    from trajgrade.graders.matching._tool_match import Matcher

__all__ = ("PLAN_CACHE_MAX", "NamePlan")

#: How many tool names a grader memoises plans for.
PLAN_CACHE_MAX: Final = 4096


class NamePlan:
    """The entries one tool name can match (the rest need no look)."""

    __slots__ = ("dis_now", "dis_res", "idle", "req", "seq")

    def __init__(
        self,
        *,
        dis_now: tuple[Matcher, ...],
        dis_res: tuple[tuple[int, Matcher], ...],
        req: tuple[tuple[int, Matcher], ...],
        seq: frozenset[int],
    ) -> None:
        self.dis_now = dis_now
        self.dis_res = dis_res
        self.req = req
        self.seq = seq
        #: No entry can match this name: only the call counter moves.
        self.idle = not (dis_now or dis_res or req or seq)

    @classmethod
    def of(
        cls,
        name: str,
        disallowed_now: Sequence[Matcher],
        disallowed_on_result: Sequence[tuple[int, Matcher]],
        required: Sequence[Matcher],
        sequence: Sequence[Matcher],
    ) -> NamePlan:
        """The plan of ``name`` for a grader's entries (``disallowed_on_result``
        pairs each entry with its bit)."""
        return cls(
            dis_now=tuple(m for m in disallowed_now if m.name(name)),
            dis_res=tuple((b, m) for b, m in disallowed_on_result if m.name(name)),
            req=tuple((i, m) for i, m in enumerate(required) if m.name(name)),
            seq=frozenset(i for i, m in enumerate(sequence) if m.name(name)),
        )
