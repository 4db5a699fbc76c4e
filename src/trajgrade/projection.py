"""Decode only what a suite reads: the projected event union.

Most of the bytes of a canonical stream are tool results (file contents,
command output), and most suites never look at them: a tool-call matcher
without a ``result:`` filter reads a result's ``call_id`` and ``is_error``
at most. Decoding a result into a Python string costs about a quarter of
the typed decode, so when no grader of the suite reads ``ToolResult.result``
the canonical reader decodes results into :class:`_ResultHead` (every field
but ``result``; msgspec skips the unknown key without building it) and
hands the engine canonical :class:`~trajgrade.events.ToolResult` events
with ``result=None``. Graders keep receiving the canonical classes.

A grader says it never reads ``ToolResult.result`` with a ``reads_result``
attribute set to False; a grader that routes tool results and says nothing
(a third-party plugin) reads it. tests/properties/test_projection.py checks
that a projected decode gives the same verdicts and decisions as the full one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import msgspec

from trajgrade.events import (
    AgentError,
    Event,
    Message,
    ToolCall,
    ToolResult,
    TraceEnd,
    TraceStart,
    TurnStart,
    Usage,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ("LEAN_EVENT", "canonical", "reads_tool_results")


class _ResultHead(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    tag_field="type",
    tag="tool_result",
    gc=False,
):
    """:class:`ToolResult` without its ``result`` (same fields, same order,
    same types, so a bad line gets the same error either way)."""

    trace_id: str = ""
    ts: float | None = None
    step: int | None = None
    call_id: str | None = None
    name: str | None = None
    is_error: bool | None = None
    duration_ms: float | None = None


#: The canonical union with tool results projected (same tags, same order).
LEAN_EVENT: Final[Any] = (
    TraceStart
    | TurnStart
    | Message
    | ToolCall
    | _ResultHead
    | Usage
    | AgentError
    | TraceEnd
)


def canonical(events: list[Any]) -> list[Event]:
    """Replace, in place, every projected result by its canonical event."""
    head = _ResultHead
    for i, ev in enumerate(events):
        if type(ev) is head:
            events[i] = ToolResult(
                trace_id=ev.trace_id,
                ts=ev.ts,
                step=ev.step,
                call_id=ev.call_id,
                name=ev.name,
                is_error=ev.is_error,
                duration_ms=ev.duration_ms,
            )
    return events


def reads_tool_results(graders: Iterable[Any]) -> bool:
    """Whether any grader can read ``ToolResult.result`` (by default, every
    grader that routes tool results does)."""
    return any(
        ToolResult in g.event_types and getattr(g, "reads_result", True)
        for g in graders
    )
