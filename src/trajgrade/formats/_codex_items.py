"""Codex rollout items (OpenAI Responses items) → canonical events.

Pure functions used by :mod:`trajgrade.formats.codex`; the mapping and its
reasons are in that module's docstring. A field path in a :class:`BadRecord`
is relative to the item, so the reader can prefix ``payload.`` for rollout
envelopes.
"""

from __future__ import annotations

import re
from typing import Any, Final, TypeGuard

import msgspec

from trajgrade._util.depth import decode_bounded
from trajgrade.events import Message, ToolCall, ToolResult
from trajgrade.formats._fields import BadField, finite, opt_str

__all__ = (
    "CALL_TYPES",
    "ITEM_TYPES",
    "OUTPUT_TYPES",
    "BadRecord",
    "content_text",
    "reasoning_message",
    "tool_call",
    "tool_result",
)

_JSON: Final = msgspec.json.Decoder()

CALL_TYPES: Final = frozenset(
    {"function_call", "custom_tool_call", "local_shell_call", "web_search_call"}
)
OUTPUT_TYPES: Final = frozenset(
    {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}
)
#: Item types a bare (pre-envelope) rollout line can hold.
ITEM_TYPES: Final = CALL_TYPES | OUTPUT_TYPES | {"message", "reasoning"}

#: Built-in tool items carry no name: the tool's name as Codex offers it.
_BUILTIN: Final = {"local_shell_call": "local_shell", "web_search_call": "web_search"}
#: Codex ≤ 0.40 wraps shell output as a JSON string with exit metadata.
_WRAPPED: Final = '{"output":'
#: Codex ≥ 0.104 prefixes tool output text with a header of these lines,
#: ending at an ``Output:`` line.
_HEADER_KEYS: Final = (
    "Chunk ID:",
    "Wall time:",
    "Exit code:",
    "Process exited with code",
    "Process running with session ID",
)
#: Headers are a few short lines; never scan a large output for them.
_HEADER_MAX: Final = 1024
_EXIT: Final = re.compile(
    r"^(?:Process exited with code|Exit code:) (-?\d+)$", re.MULTILINE
)
_WALL: Final = re.compile(r"^Wall time: (\d+(?:\.\d+)?) seconds$", re.MULTILINE)
#: Texts Codex writes instead of running a call (seen in real rollouts): a
#: PreToolUse hook denial, a sandbox refusal, a user rejecting a patch.
_FAILURES: Final = (
    "Command blocked by PreToolUse hook:",
    "failed in sandbox",
    "patch rejected by user",
)


class BadRecord(BadField):
    """A record that cannot become events: a message and the offending field."""


def _parse_args(raw: Any) -> tuple[dict[str, Any] | None, str | None]:
    """(args, args_raw): a JSON-string argument is parsed once and kept raw."""
    if raw is None:
        return None, None
    if isinstance(raw, dict):
        return raw, None
    if not isinstance(raw, str):
        msg = f"`arguments` must be a JSON string, got {type(raw).__name__}"
        raise BadRecord(msg, "arguments")
    try:
        parsed = decode_bounded(_JSON, raw)
    except (msgspec.DecodeError, UnicodeDecodeError):
        # Not JSON (e.g. a redacted log): kept raw so text graders still see it.
        return None, raw
    return (parsed if isinstance(parsed, dict) else None), raw


def content_text(content: Any) -> str:
    """A message's text: a string, or its text parts concatenated."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(
        p["text"]
        for p in content
        if isinstance(p, dict) and isinstance(p.get("text"), str)
    )


def reasoning_message(item: dict[str, Any], tid: str, ts: float | None) -> Message:
    """A ``reasoning`` item's readable text (``content``, else ``summary``)."""
    text = content_text(item.get("content"))
    if not text:
        summary = item.get("summary")
        if isinstance(summary, list):
            text = "\n".join(
                p["text"]
                for p in summary
                if isinstance(p, dict) and isinstance(p.get("text"), str)
            )
    return Message(trace_id=tid, ts=ts, role="reasoning", text=text)


def tool_call(item: dict[str, Any], tid: str, ts: float | None) -> ToolCall:
    """A call item of one of :data:`CALL_TYPES`."""
    kind = item["type"]
    builtin = _BUILTIN.get(kind)
    if builtin is not None:
        action = item.get("action")
        args = action if isinstance(action, dict) else None
        # web_search_call has no output item to pair with: no call id, so it
        # is not reported as unanswered.
        cid = None
        if kind == "local_shell_call":
            cid = opt_str(item, "call_id") or opt_str(item, "id")
        return ToolCall(trace_id=tid, ts=ts, name=builtin, call_id=cid, args=args)
    name = item.get("name")
    if not isinstance(name, str):
        got = "missing" if name is None else type(name).__name__
        msg = f"a {kind} needs a string `name` ({got})"
        raise BadRecord(msg, "name")
    raw: str | None
    if kind == "function_call":
        args, raw = _parse_args(item.get("arguments"))
    else:
        # custom_tool_call input is free text (a patch), not JSON.
        args, raw = None, opt_str(item, "input")
    cid = opt_str(item, "call_id")
    return ToolCall(
        trace_id=tid, ts=ts, name=name, call_id=cid, args=args, args_raw=raw
    )


def tool_result(
    item: dict[str, Any], tid: str, ts: float | None, *, payload: bool = True
) -> ToolResult:
    """An output item of one of :data:`OUTPUT_TYPES`, paired by ``call_id``
    (``payload`` False: no grader reads ``result``, which is left None)."""
    cid = opt_str(item, "call_id")
    if cid is None:
        msg = f"a {item['type']} needs a string `call_id` to pair it with its call"
        raise BadRecord(msg, "call_id")
    result, is_error, duration_ms = _output_status(item.get("output"), payload)
    return ToolResult(
        trace_id=tid,
        ts=ts,
        call_id=cid,
        result=result,
        is_error=is_error,
        duration_ms=duration_ms,
    )


class _Wrapped(msgspec.Struct, gc=False):
    """A ≤ 0.40 wrapped output read for its status only: the ``output`` text
    (most of the bytes) is skipped, not built."""

    metadata: Any = None


_WRAPPED_STATUS: Final = msgspec.json.Decoder(_Wrapped)


def _output_status(
    output: Any, payload: bool = True
) -> tuple[Any, bool | None, float | None]:
    """(result, is_error, duration_ms) of a tool output as Codex wrote it.

    ≤ 0.40: ``{"output", "metadata": {"exit_code", "duration_seconds"}}`` as
    a JSON string → the ``output`` text, exit code ≠ 0, the duration.
    ≥ 0.104: text with a header (``Process exited with code N`` or ``Exit
    code: N``, ``Wall time: S seconds``) → the whole text, as the model saw
    it. Known refusal texts are errors; anything else has no error flag.
    """
    if not isinstance(output, str):
        return (output if payload else None), None, None
    if output.startswith(_WRAPPED):
        text: Any = None
        try:
            if payload:
                wrapped = decode_bounded(_JSON, output)
                text = wrapped.get("output") if isinstance(wrapped, dict) else None
                meta = wrapped.get("metadata") if isinstance(wrapped, dict) else None
            else:
                meta = decode_bounded(_WRAPPED_STATUS, output).metadata
        except (msgspec.DecodeError, UnicodeDecodeError):
            meta = None
        if isinstance(meta, dict):
            code = meta.get("exit_code")
            secs = finite(meta.get("duration_seconds"))
            return (
                text,
                code != 0 if _is_int(code) else None,
                None if secs is None else finite(secs * 1000.0),
            )
    result = output if payload else None
    if output.startswith(_HEADER_KEYS):
        head = output[:_HEADER_MAX].split("\nOutput:", 1)[0]
        code_m, wall_m = _EXIT.search(head), _WALL.search(head)
        return (
            result,
            int(code_m.group(1)) != 0 if code_m else None,
            finite(float(wall_m.group(1)) * 1000.0) if wall_m else None,
        )
    if output.startswith(_FAILURES):
        return result, True, None
    return result, None, None


def _is_int(x: object) -> TypeGuard[int]:
    return isinstance(x, int) and not isinstance(x, bool)
