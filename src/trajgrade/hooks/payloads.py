"""One hook payload -> canonical events, for Claude Code, Codex and Gemini CLI.

The events are the ones the agent's own log adapter (``formats/``) gives for
the same moment, so one policy grades a live session and its recorded
transcript alike:

=====================  ==================  ==================================
Claude Code / Codex    Gemini CLI          events
=====================  ==================  ==================================
SessionStart           SessionStart        ``trace_start`` (source, model, cwd)
UserPromptSubmit       BeforeAgent         ``turn_start`` (user) + ``message`` user
PreToolUse             BeforeTool          ``tool_call`` (the gate: may be denied)
PostToolUse            AfterTool           ``tool_result``
PostToolUseFailure     (none)              ``tool_result`` with ``is_error``
SessionEnd             SessionEnd          ``trace_end``
Stop, others           AfterAgent, others  nothing (usage is still read)
=====================  ==================  ==================================

Decisions, from what the real agents send (``corpus/*-live``):

1. Trace id = ``session_id`` (the transcript adapters' trace id). A
   subagent's calls (Claude Code ``agent_id``) stay in its session's trace
   with ``agent`` set, as the transcript adapter puts them.
2. Claude Code names tools as it writes them (``Bash``, ``mcp__s__t``).
   Codex hooks call its shell tool ``Bash`` with ``{"command"}``; its rollout
   (what ``trajgrade grade`` reads) says ``exec_command`` with ``{"cmd"}``,
   so the hook call is spelled the rollout's way, and ``apply_patch``'s
   ``{"command": patch}`` becomes ``args_raw`` (a freeform call there).
3. Claude Code's Bash ``tool_response`` ``{stdout, stderr, …}`` becomes the
   text the model got (stdout, then stderr), like the transcript's result;
   other responses stay as sent.
4. Gemini sends no call id: calls get ``gemini-<n>`` in firing order and an
   ``AfterTool`` pairs with the oldest open call of the same tool and input
   (kept in the session state as a digest; at most ``OPEN_CALLS_MAX``
   calls wait, the oldest are dropped: a call the user rejects never
   ends). ``tool_response.llmContent`` is the result.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from trajgrade._util.digest import blake2b
from trajgrade.events import (
    Event,
    Message,
    ToolCall,
    ToolResult,
    TraceEnd,
    TraceStart,
    TurnStart,
)

__all__ = (
    "AGENTS",
    "GATES",
    "OpenCall",
    "Translated",
    "translate",
)

#: Agents a hook answers, as named on the command line.
AGENTS: Final = ("claude-code", "codex", "gemini")
#: The hook event that gates a tool call (the only one a deny applies to).
GATES: Final = {
    "claude-code": "PreToolUse",
    "codex": "PreToolUse",
    "gemini": "BeforeTool",
}

#: Calls without an id kept waiting for their AfterTool (Gemini's); a call
#: the user rejects never gets one, so the oldest are dropped beyond this.
OPEN_CALLS_MAX: Final = 64

_START: Final = frozenset(("SessionStart",))
_PROMPT: Final = frozenset(("UserPromptSubmit", "BeforeAgent"))
_AFTER: Final = frozenset(("PostToolUse", "AfterTool"))
_END: Final = frozenset(("SessionEnd",))


class OpenCall(msgspec.Struct, array_like=True):
    """A Gemini call still waiting for its ``AfterTool``."""

    key: str
    call_id: str


class Translated(msgspec.Struct, kw_only=True):
    """What one payload means."""

    session: str
    event: str
    events: list[Event]
    #: This payload asks whether a tool call may run.
    gate: bool = False
    transcript: str | None = None
    ends: bool = False


def translate(
    agent: str,
    payload: dict[str, Any],
    *,
    now: float,
    open_calls: list[OpenCall],
    next_call: int,
) -> tuple[Translated, int]:
    """The events of one payload, and the next Gemini call number.

    Raises ``ValueError`` naming the field when the payload lacks what the
    agent always sends (a session id, a hook event name).
    """
    session = payload.get("session_id")
    name = payload.get("hook_event_name")
    if not isinstance(session, str) or not session:
        msg = "the hook payload has no string `session_id`; is this hook registered for a supported agent?"
        raise ValueError(msg)
    if not isinstance(name, str) or not name:
        msg = "the hook payload has no string `hook_event_name`"
        raise ValueError(msg)
    transcript = payload.get("transcript_path")
    out = Translated(
        session=session,
        event=name,
        events=[],
        transcript=transcript if isinstance(transcript, str) and transcript else None,
        gate=name == GATES[agent],
        ends=name in _END,
    )
    ts = now
    events = out.events
    if name in _START:
        meta = {
            k: payload[k]
            for k in ("source", "model", "cwd")
            if isinstance(payload.get(k), str)
        }
        events.append(TraceStart(ts=ts, metadata={"agent": agent, **meta}))
    elif name in _PROMPT:
        prompt = payload.get("prompt")
        events.append(TurnStart(ts=ts, source="user"))
        events.append(
            Message(ts=ts, role="user", text=prompt if isinstance(prompt, str) else "")
        )
    elif out.gate:
        next_call = _call(agent, payload, ts, events, open_calls, next_call)
    elif name in _AFTER or name == "PostToolUseFailure":
        _result(agent, payload, ts, events, open_calls)
    elif out.ends:
        events.append(TraceEnd(ts=ts))
    return out, next_call


def _tool(
    agent: str, payload: dict[str, Any]
) -> tuple[str, dict[str, Any] | None, str | None]:
    name = payload.get("tool_name")
    if not isinstance(name, str) or not name:
        msg = "a tool hook payload needs a string `tool_name`"
        raise ValueError(msg)
    raw = payload.get("tool_input")
    args = raw if isinstance(raw, dict) else None
    args_raw = raw if isinstance(raw, str) else None
    if agent == "codex" and args is not None:
        command = args.get("command")
        if name == "Bash" and isinstance(command, str):
            return "exec_command", {"cmd": command}, None
        if name == "apply_patch" and isinstance(command, str):
            return name, None, command
    return name, args, args_raw


def _key(name: str, payload: dict[str, Any]) -> str:
    """What pairs a Gemini call with its AfterTool: a digest of the tool and
    its input (the input itself may be a whole file's content, kept in the
    session state until the call ends)."""
    h = blake2b(name.encode(), digest_size=16)
    h.update(b"\x00")
    h.update(msgspec.json.encode(payload.get("tool_input")))
    return h.hexdigest()


def _call(
    agent: str,
    payload: dict[str, Any],
    ts: float,
    events: list[Event],
    open_calls: list[OpenCall],
    next_call: int,
) -> int:
    name, args, args_raw = _tool(agent, payload)
    cid = payload.get("tool_use_id")
    if agent == "gemini" or not isinstance(cid, str) or not cid:
        next_call += 1
        cid = f"{agent}-{next_call}"
        open_calls.append(OpenCall(key=_key(name, payload), call_id=cid))
        if len(open_calls) > OPEN_CALLS_MAX:
            # A call its user rejected never ends: the oldest is let go.
            del open_calls[0]
    sub = payload.get("agent_id")
    cwd = payload.get("cwd")
    events.append(
        ToolCall(
            ts=ts,
            name=name,
            call_id=cid,
            args=args,
            args_raw=args_raw,
            agent=sub if isinstance(sub, str) and sub else None,
            cwd=cwd if isinstance(cwd, str) and cwd else None,
        )
    )
    return next_call


def _result(
    agent: str,
    payload: dict[str, Any],
    ts: float,
    events: list[Event],
    open_calls: list[OpenCall],
) -> None:
    name, _, _ = _tool(agent, payload)
    cid = payload.get("tool_use_id")
    if agent == "gemini" or not isinstance(cid, str) or not cid:
        key = _key(name, payload)
        found = next((c for c in open_calls if c.key == key), None)
        if found is None:
            return  # its call was never seen (hook registered mid-call)
        open_calls.remove(found)
        cid = found.call_id
    failed = payload.get("hook_event_name") == "PostToolUseFailure"
    duration = payload.get("duration_ms")
    events.append(
        ToolResult(
            ts=ts,
            call_id=cid,
            name=name,
            result=payload.get("error") if failed else _response(agent, payload),
            is_error=failed,
            duration_ms=float(duration)
            if isinstance(duration, int | float) and not isinstance(duration, bool)
            else None,
        )
    )


def _response(agent: str, payload: dict[str, Any]) -> Any:
    resp = payload.get("tool_response")
    if agent == "claude-code" and isinstance(resp, dict) and "stdout" in resp:
        parts = [
            p
            for p in (resp.get("stdout"), resp.get("stderr"))
            if isinstance(p, str) and p
        ]
        return "\n".join(parts)
    if agent == "gemini" and isinstance(resp, dict) and "llmContent" in resp:
        return resp["llmContent"]
    return resp
