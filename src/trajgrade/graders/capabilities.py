"""What a grader may offer beyond the :class:`~trajgrade.graders.Grader`
protocol, and how a compiled suite asks for it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trajgrade.events import ToolResult

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ("reads_tool_results", "ticks_when_due")


def reads_tool_results(graders: Iterable[Any]) -> bool:
    """Whether any grader can read ``ToolResult.result`` (by default, every
    grader that routes tool results does)."""
    return any(
        ToolResult in g.event_types and getattr(g, "reads_result", True)
        for g in graders
    )


def ticks_when_due(grader: Any) -> bool:
    """A clock-driven grader that says when its ``tick`` may next decide
    something (``deadline``): the engine ticks its traces only then."""
    return callable(getattr(grader, "deadline", None))
