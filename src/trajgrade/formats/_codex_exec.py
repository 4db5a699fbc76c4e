"""``codex exec --json`` thread items → canonical events.

Pure helpers used by :mod:`trajgrade.formats.codex` (whose docstring has the
mapping and its reasons). Field paths in a :class:`BadRecord` are relative to
the line (``item.…``).
"""

from __future__ import annotations

from typing import Any, Final

from trajgrade.events import Event, Message, ToolCall, ToolResult
from trajgrade.formats._codex_items import BadRecord

__all__ = ("EXEC_TYPES", "OPEN_ITEMS_MAX", "ExecItems")

#: Top-level ``type`` of every ``codex exec --json`` line.
EXEC_TYPES: Final = frozenset(
    {
        "thread.started",
        "turn.started",
        "turn.completed",
        "turn.failed",
        "item.started",
        "item.updated",
        "item.completed",
        "error",
    }
)
#: Item types that are tool calls; the tool name is the item type except for
#: MCP (``mcp__<server>__<tool>``, as rollouts name it) and subagent tools.
TOOL_ITEMS: Final = frozenset(
    {
        "command_execution",
        "file_change",
        "mcp_tool_call",
        "web_search",
        "collab_tool_call",
    }
)
_FAILED: Final = frozenset({"failed", "declined"})
#: Tool items started and not yet completed that are remembered.
OPEN_ITEMS_MAX: Final = 4096


def _item_str(item: dict[str, Any], key: str) -> str:
    value = item.get(key)
    if not isinstance(value, str):
        got = "missing" if value is None else type(value).__name__
        msg = f"a {item.get('type')} item needs a string `{key}` ({got})"
        raise BadRecord(msg, f"item.{key}")
    return value


def _call(item: dict[str, Any], tid: str, iid: str) -> ToolCall:
    """The call part of a tool item (known at ``item.started``)."""
    kind = item["type"]
    args: dict[str, Any] | None
    if kind == "command_execution":
        name, args = kind, {"command": item.get("command")}
    elif kind == "file_change":
        name, args = kind, {"changes": item.get("changes")}
    elif kind == "mcp_tool_call":
        name = f"mcp__{_item_str(item, 'server')}__{_item_str(item, 'tool')}"
        arguments = item.get("arguments")
        args = arguments if isinstance(arguments, dict) else None
    elif kind == "web_search":
        name, args = kind, {"query": item.get("query")}
    else:  # collab_tool_call: spawn_agent, send_input, wait, close_agent
        name = _item_str(item, "tool")
        args = {
            "prompt": item.get("prompt"),
            "receivers": item.get("receiver_thread_ids"),
        }
    return ToolCall(trace_id=tid, name=name, call_id=iid, args=args)


def _result(item: dict[str, Any], tid: str, iid: str) -> ToolResult:
    """The result part of a completed tool item; errors from status/exit code."""
    kind = item["type"]
    status = item.get("status")
    failed = isinstance(status, str) and status in _FAILED
    result: Any
    if kind == "command_execution":
        code = item.get("exit_code")
        result = item.get("aggregated_output")
        failed = failed or (isinstance(code, int) and code != 0)
    elif kind == "mcp_tool_call":
        error = item.get("error")
        result = item.get("result") if error is None else error
        failed = failed or error is not None
    elif kind == "collab_tool_call":
        result = item.get("agents_states")
    else:  # file_change reports only its status; web_search no result at all
        result = status
    return ToolResult(
        trace_id=tid,
        call_id=iid,
        result=result,
        is_error=failed if status is not None or failed else None,
    )


def _text_item(item: dict[str, Any], tid: str) -> list[Event]:
    """A non-tool completed item: agent text, reasoning, or a warning."""
    kind = item.get("type")
    text = item.get("text") if kind != "error" else item.get("message")
    if not isinstance(text, str):
        text = ""
    if kind == "agent_message":
        return [Message(trace_id=tid, role="assistant", text=text)]
    if kind == "reasoning":
        return [Message(trace_id=tid, role="reasoning", text=text)]
    if kind == "error":
        # Codex uses error *items* for non-fatal notices (config warnings,
        # deprecations, model reroutes); fatal errors are `error` lines and
        # `turn.failed`. A warning must not count in error-count graders.
        return [Message(trace_id=tid, role="warning", text=text)]
    # todo_list mirrors the update_plan tool's state; other types are unknown.
    return []


class ExecItems:
    """Maps ``item.*`` lines; remembers the tool items started but not
    completed (their call was emitted), at most :data:`OPEN_ITEMS_MAX`."""

    __slots__ = ("_open",)

    def __init__(self) -> None:
        self._open: dict[str, None] = {}

    def reset(self) -> None:
        """A new thread: its item ids start over."""
        self._open.clear()

    def events(self, kind: str, item: Any, tid: str) -> list[Event]:
        """The events of an ``item.started`` or ``item.completed`` line."""
        if not isinstance(item, dict):
            msg = f"{kind} needs an `item` object"
            raise BadRecord(msg, "item")
        itype = item.get("type")
        if not isinstance(itype, str) or itype not in TOOL_ITEMS:
            return _text_item(item, tid) if kind == "item.completed" else []
        # The item id is the call id: started and completed lines share it.
        iid = _item_str(item, "id")
        opened = self._open
        if kind == "item.started":
            if iid in opened:
                return []
            if len(opened) >= OPEN_ITEMS_MAX:
                del opened[next(iter(opened))]
            opened[iid] = None
            return [_call(item, tid, iid)]
        if iid in opened:
            del opened[iid]
            return [_result(item, tid, iid)]
        # Completed without a start line: the call is only known now.
        return [_call(item, tid, iid), _result(item, tid, iid)]
