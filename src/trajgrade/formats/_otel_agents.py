"""Agents' OpenTelemetry log events as canonical events, one record at a time.

Each mapper takes one log record's event name (without the agent prefix),
its attributes (decoded AnyValues) and its time, and returns events; the
trace is the agent's session attribute. The attribute names are those the
real CLIs export (recorded in ``tests/fixtures/otel-live/``, see its
PROVENANCE.md); where an agent's documentation names more events than the
recording shows, they are mapped from the documentation and say so.

Claude Code (``claude_code.*``, trace ``session.id``):

* ``user_prompt`` → ``turn_start`` (source ``user``);
* ``api_request`` → ``turn_start`` (source ``agent``) then ``usage``
  (``model``, ``cost_usd``; ``input_tokens`` plus the cache reads and
  writes, as for Claude Code's transcripts: canonical input counts every
  prompt token);
* ``api_error`` → ``error``;
* ``tool_decision`` with ``decision`` ``reject`` → ``tool_call`` (arguments
  from ``tool_parameters``) then a failed ``tool_result``: the tool never ran;
* ``tool_result`` → ``tool_call`` (``tool_input`` JSON text as ``args_raw``,
  parsed into ``args``; present with ``OTEL_LOG_TOOL_DETAILS=1``) then
  ``tool_result`` (``success``, ``duration_ms``; the output itself is not
  exported, so ``result`` is ``error`` when it failed, else unset). The call
  is stamped ``duration_ms`` before the result.

Codex (``codex.*``, the name in the ``event.name`` attribute, trace
``conversation.id``): ``user_prompt`` → ``turn_start``; ``tool_result`` →
``tool_call`` (``tool_name``, ``call_id``, ``arguments``) and
``tool_result`` (``output``, ``success``, ``duration_ms``);
``tool_decision`` ``denied``/``abort`` → a call and a failed result;
``sse_event`` of kind ``response.completed`` with token counts →
``turn_start`` and ``usage`` (``input_token_count``, which includes
``cached_token_count``, ``output_token_count``, ``reasoning_token_count``,
``model``).

Gemini CLI (``gemini_cli.*``, the name in ``event.name``, trace
``session.id``): ``user_prompt`` → ``turn_start``; ``tool_call`` →
``tool_call`` (``function_name``, ``function_args``) and ``tool_result``
(``success`` and ``metadata.isError``, ``duration_ms``, ``error``; no call id;
``function_args`` is exported with ``logPrompts: true``); ``api_response`` → ``turn_start``
and ``usage`` (``input_token_count``, ``output_token_count``,
``cached_content_token_count``, ``thoughts_token_count``, ``model``);
``api_error`` → ``error``.

Events a mapper does not list (``assistant_response``, config events, …)
carry nothing a grader reads and become nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from trajgrade.events import AgentError, Event, ToolCall, ToolResult, TurnStart, Usage
from trajgrade.formats._fields import finite
from trajgrade.formats._otel_values import BadValue, json_object

__all__ = ("AGENTS", "Mapper")

Mapper = Callable[[str, str, dict[str, Any], float], list[Event]]

#: The longest count written as text that is read (a 64-bit one has 20 digits).
_DIGITS: Final = 20


def _int(attrs: dict[str, Any], key: str) -> int:
    """A count the agents write as an int, or as its decimal text."""
    value = attrs.get(key, 0)
    # (ASCII only: isdigit alone takes superscripts, which int refuses)
    if (
        isinstance(value, str)
        and len(value) <= _DIGITS
        and value.isascii()
        and value.isdigit()
    ):
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    msg = f"{key} must be a non-negative integer, got {value!r:.60}"
    raise BadValue(msg, field="attributes")


def _float(attrs: dict[str, Any], key: str) -> float | None:
    value = attrs.get(key)
    if value is None:
        return None
    if isinstance(value, str):  # (the agents write some numbers as text)
        try:
            value = float(value)
        except ValueError:
            pass
    number = finite(value)
    if number is None:
        msg = f"{key} must be a finite number, got {value!r:.60}"
        raise BadValue(msg, field="attributes")
    return number


def _str(attrs: dict[str, Any], key: str) -> str | None:
    value = attrs.get(key)
    if value is None or isinstance(value, str):
        return value
    return str(value)


def _name(attrs: dict[str, Any], key: str) -> str:
    name = attrs.get(key)
    if not isinstance(name, str) or not name:
        msg = f"a tool event needs a string {key}"
        raise BadValue(msg, field="attributes")
    return name


def _ok(attrs: dict[str, Any], key: str) -> bool:
    """``success`` as a bool, or as the text ``"true"``/``"false"``."""
    value = attrs.get(key, True)
    return value is True or (isinstance(value, str) and value.lower() == "true")


def _call(
    trace: str, ts: float, name: str, cid: str | None, raw: Any, dur: float | None
) -> ToolCall:
    args = raw if isinstance(raw, dict) else json_object(raw)
    return ToolCall(
        trace_id=trace,
        ts=ts if dur is None else ts - dur / 1000,
        name=name,
        call_id=cid,
        args=args,
        args_raw=raw if isinstance(raw, str) else None,
    )


def _completed(
    trace: str,
    ts: float,
    name: str,
    cid: str | None,
    args: Any,
    result: Any,
    is_error: bool,
    dur: float | None,
) -> list[Event]:
    """A call and its result, from one log record that reports both."""
    return [
        _call(trace, ts, name, cid, args, dur),
        ToolResult(
            trace_id=trace,
            ts=ts,
            call_id=cid,
            name=name,
            result=result,
            is_error=is_error,
            duration_ms=dur,
        ),
    ]


# ---------------------------------------------------------------- Claude Code
def _claude(event: str, trace: str, a: dict[str, Any], ts: float) -> list[Event]:
    if event == "user_prompt":
        return [TurnStart(trace_id=trace, ts=ts, source="user")]
    if event == "api_request":
        read = _int(a, "cache_read_tokens")
        write = _int(a, "cache_creation_tokens")
        return [
            TurnStart(trace_id=trace, ts=ts, source="agent"),
            Usage(
                trace_id=trace,
                ts=ts,
                input_tokens=_int(a, "input_tokens") + read + write,
                output_tokens=_int(a, "output_tokens"),
                cache_read_tokens=read,
                cache_write_tokens=write,
                cost_usd=_float(a, "cost_usd"),
                model=_str(a, "model"),
            ),
        ]
    if event == "api_error":
        msg = _str(a, "error") or "API request failed"
        return [
            AgentError(trace_id=trace, ts=ts, message=msg, code=_str(a, "status_code"))
        ]
    if event == "tool_decision" and a.get("decision") == "reject":
        name, cid = _name(a, "tool_name"), _str(a, "tool_use_id")
        return _completed(
            trace, ts, name, cid, a.get("tool_parameters"), "rejected", True, None
        )
    if event == "tool_result":
        name, cid = _name(a, "tool_name"), _str(a, "tool_use_id")
        dur = _float(a, "duration_ms")
        ok = _ok(a, "success")
        return _completed(
            trace,
            ts,
            name,
            cid,
            a.get("tool_input"),
            None if ok else (_str(a, "error") or "error"),
            not ok,
            dur,
        )
    return []


# ---------------------------------------------------------------- Codex
def _codex(event: str, trace: str, a: dict[str, Any], ts: float) -> list[Event]:
    if event == "user_prompt":
        return [TurnStart(trace_id=trace, ts=ts, source="user")]
    if event == "tool_result":
        name, cid = _name(a, "tool_name"), _str(a, "call_id")
        dur = _float(a, "duration_ms")
        ok = _ok(a, "success")
        return _completed(
            trace, ts, name, cid, a.get("arguments"), a.get("output"), not ok, dur
        )
    if event == "tool_decision" and a.get("decision") in ("denied", "abort"):
        name, cid = _name(a, "tool_name"), _str(a, "call_id")
        return _completed(trace, ts, name, cid, None, str(a["decision"]), True, None)
    # Codex writes ``response.completed`` twice: the SSE event itself, then
    # the one with the token counts.
    if (
        event == "sse_event"
        and a.get("event.kind") == "response.completed"
        and "input_token_count" in a
    ):
        return _response(trace, ts, a, "cached_token_count", "reasoning_token_count")
    return []


def _response(
    trace: str, ts: float, a: dict[str, Any], cached: str, reasoning: str
) -> list[Event]:
    """A model response (Codex, Gemini): the agent's turn and its usage;
    ``input_token_count`` includes the cached tokens. The two name the
    cached and reasoning counts differently."""
    return [
        TurnStart(trace_id=trace, ts=ts, source="agent"),
        Usage(
            trace_id=trace,
            ts=ts,
            input_tokens=_int(a, "input_token_count"),
            output_tokens=_int(a, "output_token_count"),
            cache_read_tokens=_int(a, cached),
            reasoning_tokens=_int(a, reasoning),
            model=_str(a, "model"),
        ),
    ]


# ---------------------------------------------------------------- Gemini CLI
def _gemini(event: str, trace: str, a: dict[str, Any], ts: float) -> list[Event]:
    if event == "user_prompt":
        return [TurnStart(trace_id=trace, ts=ts, source="user")]
    if event == "tool_call":
        # Gemini names no call id (``prompt_id`` is shared by a turn's
        # calls): the result pairs with its call by position.
        name, cid = _name(a, "function_name"), None
        dur = _float(a, "duration_ms")
        # A shell command that exits non-zero is a "successful" call whose
        # ``metadata`` says ``isError``.
        meta = json_object(a.get("metadata")) or {}
        ok = _ok(a, "success") and meta.get("isError") is not True
        return _completed(
            trace,
            ts,
            name,
            cid,
            a.get("function_args"),
            None if ok else (_str(a, "error") or "error"),
            not ok,
            dur,
        )
    if event == "api_response":
        return _response(
            trace, ts, a, "cached_content_token_count", "thoughts_token_count"
        )
    if event == "api_error":
        msg = _str(a, "error") or "API request failed"
        return [
            AgentError(trace_id=trace, ts=ts, message=msg, code=_str(a, "status_code"))
        ]
    return []


#: Event-name prefix → (the attribute naming the trace, the mapper).
AGENTS: Final[dict[str, tuple[str, Mapper]]] = {
    "claude_code.": ("session.id", _claude),
    "codex.": ("conversation.id", _codex),
    "gemini_cli.": ("session.id", _gemini),
}
