"""OpenAI chat-completions messages -> canonical events (shared by the
``openai-chat`` readers and SWE-agent 1.x, whose history uses the same
``tool_calls`` shape).

A :class:`Conversation` is one trace's message list, read one message at a
time: it numbers the turns (one per ``user`` message) and raises
:class:`BadMessageError` (with the field, relative to the message) for a
message it cannot read, so the caller can locate it and go on.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from trajgrade._util.depth import decode_bounded
from trajgrade.events import (
    AgentError,
    Event,
    Message,
    ToolCall,
    ToolResult,
    TraceEnd,
    TraceStart,
    TurnStart,
)

__all__ = (
    "MESSAGE_KEYS",
    "BadMessageError",
    "Conversation",
    "run_events",
    "run_id",
    "text_of",
    "tool_call",
)

_JSON: Final = msgspec.json.Decoder()
#: Keys of a run that hold its messages (``traj``: tau-bench), in order of preference.
MESSAGE_KEYS: Final = ("messages", "traj")
#: Keys that name a run's trace, in order of preference.
ID_KEYS: Final = ("trace_id", "id", "conversation_id")


class BadMessageError(Exception):
    """One message cannot be read; ``field`` is relative to the message."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.message, self.field = message, field


def text_of(content: Any) -> str:
    """A message's text: a string, or its text parts joined by a newline."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p["text"]
            for p in content
            if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    msg = f"`content` must be a string, a list of parts or null, got {type(content).__name__}"
    raise BadMessageError(msg, "content")


def tool_call(c: Any, tid: str, field: str, agent: str | None = None) -> ToolCall:
    """One ``{id, type: "function", function: {name, arguments}}`` entry.

    ``arguments`` (a JSON string) is kept verbatim in ``args_raw`` and parsed
    once into ``args`` when it is a JSON object; an object is taken as is.
    """
    fn = c.get("function") if isinstance(c, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        msg = "a tool call must be {id, type, function: {name, arguments}}"
        raise BadMessageError(msg, field)
    raw = fn.get("arguments")
    args: dict[str, Any] | None = None
    if isinstance(raw, dict):
        args, raw = raw, None
    elif isinstance(raw, str):
        try:
            parsed = decode_bounded(_JSON, raw)
        except (msgspec.DecodeError, UnicodeDecodeError):
            parsed = None  # kept raw only: text graders still see it
        args = parsed if isinstance(parsed, dict) else None
    elif raw is not None:
        msg = f"`arguments` must be a JSON string, got {type(raw).__name__}"
        raise BadMessageError(msg, f"{field}.function.arguments")
    cid = c.get("id")
    return ToolCall(
        trace_id=tid,
        name=fn["name"],
        call_id=cid if isinstance(cid, str) else None,
        args=args,
        args_raw=raw,
        agent=agent,
    )


class Conversation:
    """One trace's messages, read in order."""

    def __init__(self, tid: str) -> None:
        self.tid = tid
        self.turns = 0

    def message(self, m: Any) -> list[Event]:
        """One message -> its events."""
        if not isinstance(m, dict):
            msg = f"a message must be an object, got {type(m).__name__}"
            raise BadMessageError(msg)
        role = m.get("role")
        if not isinstance(role, str):
            msg = "a message needs a string `role`"
            raise BadMessageError(msg, "role")
        tid = self.tid
        if role == "tool":
            cid = m.get("tool_call_id")
            name = m.get("name")
            return [
                ToolResult(
                    trace_id=tid,
                    call_id=cid if isinstance(cid, str) else None,
                    name=name if isinstance(name, str) else None,
                    result=m.get("content"),
                )
            ]
        text = text_of(m.get("content"))
        if role == "user":
            step, self.turns = self.turns, self.turns + 1
            return [
                TurnStart(trace_id=tid, step=step, source="user"),
                Message(trace_id=tid, role="user", text=text),
            ]
        out: list[Event] = []
        if text or role != "assistant":
            out.append(Message(trace_id=tid, role=role, text=text))
        if role == "assistant":
            calls = m.get("tool_calls")
            if calls is not None and not isinstance(calls, list):
                msg = "`tool_calls` must be a list"
                raise BadMessageError(msg, "tool_calls")
            for k, c in enumerate(calls or ()):
                out.append(tool_call(c, tid, f"tool_calls[{k}]"))
        return out


def run_events(
    run: Any, tid: str
) -> tuple[list[Event], list[tuple[str, BadMessageError]]]:
    """A whole conversation (a message list, or a run object holding one) ->
    its events, ended by ``trace_end``; plus each unreadable message's
    (field prefix, error)."""
    events: list[Event] = []
    bad: list[tuple[str, BadMessageError]] = []
    at, messages = "", run
    if isinstance(run, dict):
        key = next((k for k in MESSAGE_KEYS if isinstance(run.get(k), list)), None)
        if key is None:
            msg = "expected `messages` (or tau-bench `traj`): a list of chat messages"
            return [], [("", BadMessageError(msg, "messages"))]
        at, messages = key, run[key]
        meta = {k: v for k, v in run.items() if k not in MESSAGE_KEYS}
        if meta:
            events.append(TraceStart(trace_id=tid, metadata=meta))
    conv = Conversation(tid)
    for j, m in enumerate(messages):
        try:
            events.extend(conv.message(m))
        except BadMessageError as exc:
            bad.append((f"{at}[{j}]", exc))
    info = run.get("info") if isinstance(run, dict) else None
    crash = info.get("error") if isinstance(info, dict) else None
    if crash:
        events.append(AgentError(trace_id=tid, message=str(crash)))
    events.append(TraceEnd(trace_id=tid, is_error=True if crash else None))
    return events, bad


def run_id(run: Any) -> str | None:
    """The trace a run names: ``trace_id``/``id``/``conversation_id``, else
    tau-bench's ``<task_id>/<trial>``; None when it names none."""
    if not isinstance(run, dict):
        return None
    for key in ID_KEYS:
        value = run.get(key)
        if isinstance(value, str | int) and not isinstance(value, bool):
            return str(value)
    task = run.get("task_id")
    if isinstance(task, str | int) and not isinstance(task, bool):
        trial = run.get("trial")
        return f"{task}/{trial}" if isinstance(trial, int) else str(task)
    return None
