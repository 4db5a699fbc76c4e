"""OpenHands event streams: a JSON array of action and observation events.

Each event has ``id``, ``timestamp``, ``source`` (``user``, ``agent``,
``environment``), ``message``, and either ``action`` + ``args`` or
``observation`` + ``content`` + ``extras``. The document is read
incrementally, one event at a time.

Mapping:

* An action carrying ``tool_call_metadata`` (``run``, ``edit``, ``read``,
  ``finish``, …) → ``message`` (role ``assistant``, its ``args.thought``,
  when not empty), ``usage`` (see 3) and ``tool_call``: ``name`` =
  ``function_name``, ``call_id`` = ``tool_call_id``; the arguments the model
  wrote (the matching ``model_response.choices[].message.tool_calls[]``
  entry, a JSON string) are kept in ``args_raw`` and parsed once into
  ``args``; without that entry ``args`` is the event's ``args``.
* ``message`` actions: from ``user`` → ``turn_start`` (source ``user``) +
  ``message`` (role ``user``); from the agent → ``message`` (role
  ``assistant``). ``system`` actions → ``message`` (role ``system``).
* An observation whose ``cause`` is a tool call's event ``id`` →
  ``tool_result`` (that call's id and name, ``content``, and
  ``duration_ms`` from the two timestamps).
* ``error`` observations not caused by a tool call, and
  ``agent_state_changed`` to ``error`` → ``error``.
* Skipped: other actions (``change_agent_state``, ``recall``, …),
  ``null`` observations (acknowledgements), other observations with no
  tool-call cause, other agent states.

Decisions:

1. Pairing: by ``cause`` (observation → action ``id``), the call id being
   the action's ``tool_call_id``; calls without an observation (``finish``)
   stay unanswered. An ``id`` or ``cause`` that is not an event id (an
   integer; a string is taken too) is an input error at that event, which
   is skipped.
2. Errors: a ``run`` observation is an error when
   ``extras.metadata.exit_code`` is neither 0 nor -1 (-1: the command was
   still running at the timeout, neither success nor failure: left unset);
   an ``error`` observation is an error; other observations leave
   ``is_error`` unset.
3. Usage: ``model_response.usage`` is repeated on every action of one
   response and on their observations; it is counted once per
   ``model_response.id``, on the first action that carries it:
   ``prompt_tokens`` (all input, cached included) → input,
   ``completion_tokens`` → output, ``cache_read_input_tokens`` (else
   ``prompt_tokens_details.cached_tokens``) → cache reads,
   ``cache_creation_input_tokens`` → cache writes,
   ``completion_tokens_details.reasoning_tokens`` → reasoning.
4. Turns: one per ``user`` ``message`` action (``agent_state_changed`` to
   ``awaiting_user_input`` closes a turn; the next prompt opens one).
5. Timestamps are ISO-8601 without a zone; they are read as UTC.
6. The document is a finished run: ``trace_end`` at its end; its
   ``result`` is the ``finish`` action's ``final_thought`` (else its
   ``thought``, else its ``message``); ``is_error`` when the agent's last
   state was ``error``. The trace is the source's default trace.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

import msgspec

from trajgrade.events import (
    AgentError,
    Message,
    ToolCall,
    ToolResult,
    TraceEnd,
    TurnStart,
    Usage,
)
from trajgrade.formats._document import DocShape, DocumentReader
from trajgrade.formats._openai_chat_messages import BadMessageError, tool_call

if TYPE_CHECKING:
    from trajgrade.errors import InputError
    from trajgrade.events import Event

__all__ = ("FORMAT", "FORMATS", "OpenHandsReader")

#: Open calls and seen responses kept per document (oldest forgotten first).
_MEMORY: Final = 4096


class OpenHandsReader(DocumentReader):
    """Translates an OpenHands event array into canonical events."""

    format = "openhands"
    ITEMS = ("item",)

    def __init__(self, *, source: str, default_trace: str) -> None:
        super().__init__(source=source, default_trace=default_trace)
        self._index = 0
        self._turns = 0
        #: Action event id -> (call id, name, ts) of calls awaiting results.
        self._calls: dict[int | str, tuple[str | None, str, float | None]] = {}
        self._responses: dict[str, None] = {}
        self._result: Any = None
        self._errored: bool | None = None

    def item(
        self, prefix: str, obj: Any, events: list[Event], errors: list[InputError]
    ) -> None:
        at = f"[{self._index}]"
        self._index += 1
        try:
            if not isinstance(obj, dict):
                msg = f"an OpenHands event must be an object, got {type(obj).__name__}"
                raise BadMessageError(msg)
            if "action" in obj:
                events.extend(self._action(obj))
            elif "observation" in obj:
                events.extend(self._observation(obj))
            else:
                msg = "an OpenHands event needs `action` or `observation`"
                raise BadMessageError(msg, "action")
        except BadMessageError as exc:
            field = f"{at}.{exc.field}" if exc.field else at
            errors.append(self.error(exc.message, field=field, trace=self.trace_id))

    def _action(self, e: dict[str, Any]) -> list[Event]:
        tid, ts = self.trace_id, _timestamp(e.get("timestamp"))
        kind = e.get("action")
        args = _dict(e.get("args"))
        meta = e.get("tool_call_metadata")
        if kind == "message":
            text = str(args.get("content") or "")
            if e.get("source") == "user":
                step, self._turns = self._turns, self._turns + 1
                return [
                    TurnStart(trace_id=tid, ts=ts, step=step, source="user"),
                    Message(trace_id=tid, ts=ts, role="user", text=text),
                ]
            return [Message(trace_id=tid, ts=ts, role="assistant", text=text)]
        if kind == "system":
            text = str(args.get("content") or "")
            return [Message(trace_id=tid, ts=ts, role="system", text=text)]
        if not isinstance(meta, dict):
            return []
        name = meta.get("function_name")
        if not isinstance(name, str):
            msg = "`tool_call_metadata.function_name` must be a string"
            raise BadMessageError(msg, "tool_call_metadata.function_name")
        cid = meta.get("tool_call_id")
        cid = cid if isinstance(cid, str) else None
        out: list[Event] = []
        thought = args.get("thought")
        if isinstance(thought, str) and thought:
            out.append(Message(trace_id=tid, ts=ts, role="assistant", text=thought))
        response = meta.get("model_response")
        if isinstance(response, dict):
            out.extend(self._usage(response, tid, ts))
        call = self._call(response, cid, name, args)
        out.append(msgspec.structs.replace(call, ts=ts))
        eid = _event_id(e, "id")
        if eid is not None:  # (without an id no observation can name it)
            self._remember(self._calls, eid, (cid, name, ts))
        if kind == "finish":
            self._result = (
                args.get("final_thought") or args.get("thought") or e.get("message")
            )
        return out

    def _call(
        self, response: Any, cid: str | None, name: str, args: dict[str, Any]
    ) -> ToolCall:
        """The call as the model wrote it, else from the event's args."""
        tid = self.trace_id
        choices = response.get("choices") if isinstance(response, dict) else None
        for choice in choices if isinstance(choices, list) else ():
            message = choice.get("message") if isinstance(choice, dict) else None
            calls = message.get("tool_calls") if isinstance(message, dict) else None
            for k, c in enumerate(calls if isinstance(calls, list) else ()):
                if cid is not None and isinstance(c, dict) and c.get("id") == cid:
                    field = f"tool_call_metadata.model_response.tool_calls[{k}]"
                    return tool_call(c, tid, field)
        return ToolCall(trace_id=tid, name=name, call_id=cid, args=args or None)

    def _usage(
        self, response: dict[str, Any], tid: str, ts: float | None
    ) -> list[Event]:
        rid = response.get("id")
        usage = response.get("usage")
        if not isinstance(rid, str) or rid in self._responses:
            return []
        self._remember(self._responses, rid, None)
        if not isinstance(usage, dict):
            return []
        prompt = _dict(usage.get("prompt_tokens_details"))
        completion = _dict(usage.get("completion_tokens_details"))
        return [
            Usage(
                trace_id=tid,
                ts=ts,
                input_tokens=_count(usage.get("prompt_tokens")),
                output_tokens=_count(usage.get("completion_tokens")),
                cache_read_tokens=_count(usage.get("cache_read_input_tokens"))
                or _count(prompt.get("cached_tokens")),
                cache_write_tokens=_count(usage.get("cache_creation_input_tokens")),
                reasoning_tokens=_count(completion.get("reasoning_tokens")),
                model=model
                if isinstance(model := response.get("model"), str) and model
                else None,
            )
        ]

    def _observation(self, e: dict[str, Any]) -> list[Event]:
        tid, ts = self.trace_id, _timestamp(e.get("timestamp"))
        kind = e.get("observation")
        extras = _dict(e.get("extras"))
        if kind == "agent_state_changed":
            state = extras.get("agent_state")
            self._errored = True if state == "error" else None
            if state != "error":
                return []
            reason = extras.get("reason") or "the agent entered the error state"
            return [AgentError(trace_id=tid, ts=ts, message=str(reason))]
        cause = _event_id(e, "cause")
        call = None if cause is None else self._calls.pop(cause, None)
        if call is None:
            if kind == "error":
                message = str(e.get("content") or e.get("message") or "")
                return [AgentError(trace_id=tid, ts=ts, message=message)]
            return []
        cid, name, started = call
        is_error: bool | None = True if kind == "error" else None
        if kind == "run":
            code = _dict(extras.get("metadata")).get("exit_code")
            if isinstance(code, int) and code != -1:
                is_error = code != 0
        duration = None
        if ts is not None and started is not None:
            duration = round((ts - started) * 1000, 3)
        return [
            ToolResult(
                trace_id=tid,
                ts=ts,
                call_id=cid,
                name=name,
                result=e.get("content"),
                is_error=is_error,
                duration_ms=duration,
            )
        ]

    @staticmethod
    def _remember(table: dict[Any, Any], key: Any, value: Any) -> None:
        table[key] = value
        if len(table) > _MEMORY:
            del table[next(iter(table))]

    def end(self, events: list[Event], errors: list[InputError]) -> None:
        events.append(
            TraceEnd(
                trace_id=self.trace_id, result=self._result, is_error=self._errored
            )
        )


def _timestamp(value: Any) -> float | None:
    """ISO-8601 text -> epoch seconds; a time without a zone is UTC."""
    if not isinstance(value, str) or not value:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def _event_id(e: dict[str, Any], key: str) -> int | str | None:
    """An event's ``id``, or the ``cause`` naming one: an integer (or a
    string); None when absent. Another value names no event: bad input."""
    value = e.get(key)
    if value is None or (isinstance(value, int | str) and not isinstance(value, bool)):
        return value
    msg = f"`{key}` must be an event id (an integer), got {type(value).__name__}"
    raise BadMessageError(msg, key)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class _OpenHandsFormat:
    name = "openhands"
    summary = "OpenHands event streams: a JSON array of action/observation events (tool_call_metadata, finish)"

    def sniff(self, record: object) -> bool:
        return False  # a document, never a line (see sniff_document)

    def sniff_document(self, shape: DocShape) -> bool:
        first = shape.first_item_keys
        return (
            shape.is_array
            and "source" in first
            and "timestamp" in first
            and bool({"action", "observation"} & first)
        )

    def reader(self, *, source: str, default_trace: str) -> OpenHandsReader:
        return OpenHandsReader(source=source, default_trace=default_trace)


FORMAT: Final = _OpenHandsFormat()

#: What this module contributes to the registry.
FORMATS: Final = (FORMAT,)
