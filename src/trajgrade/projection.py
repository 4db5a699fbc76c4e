"""Decode only what a suite reads: the projected event union.

Most of the bytes of a canonical stream are tool results (file contents,
command output), and most suites never look at them: a tool-call matcher
without a ``result:`` filter reads a result's ``call_id`` and ``is_error``
at most. Decoding a result into a Python string costs about an eighth of
the typed decode, so when no grader of the suite reads ``ToolResult.result``
the canonical reader decodes results as :class:`LeanResult`: a subclass of
:class:`~trajgrade.events.ToolResult` whose ``result`` field is renamed to a
key no producer writes, so msgspec skips the JSON ``result`` without building
it and the attribute stays None. Graders keep receiving a ``ToolResult``
(``isinstance`` holds; the engine routes the subclass as ``ToolResult``), and
no pass over the events converts anything.

Agents' readers that can skip the payload cheaply do the same through
``skip_tool_results()`` (:class:`~trajgrade.formats.SkipsToolResults`): the
Codex reader reads a wrapped output's status without building its text and
leaves ``result`` None. tests/formats/test_codex.py checks that every other
field and event is unchanged.

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

__all__ = ("LEAN_EVENT", "LeanResult", "reads_tool_results")


class LeanResult(ToolResult, tag="tool_result", frozen=True):
    """A :class:`ToolResult` decoded without its ``result`` (None)."""

    #: Never a producer's key: the JSON ``result`` is skipped unread.
    result: Any = msgspec.field(name="result (not decoded)", default=None)


#: The canonical union with tool results projected (same tags, same order).
LEAN_EVENT: Final[Any] = (
    TraceStart
    | TurnStart
    | Message
    | ToolCall
    | LeanResult
    | Usage
    | AgentError
    | TraceEnd
)


def reads_tool_results(graders: Iterable[Any]) -> bool:
    """Whether any grader can read ``ToolResult.result`` (by default, every
    grader that routes tool results does)."""
    return any(
        ToolResult in g.event_types and getattr(g, "reads_result", True)
        for g in graders
    )
