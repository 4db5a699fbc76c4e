"""Letta trajectories (letta-evals, seed 002): one trace per JSON record.

A record (one line) is one of:

* a list of turns, each a list of Letta messages: ``[[msg, …], …]``, the
  ``trajectory`` letta-evals grades;
* a flat list of messages ``[msg, …]`` (one turn);
* an object with a ``trajectory`` (``{"trace_id", "trajectory"}`` as in the
  benchmark corpus' ``letta.jsonl``, or a letta-evals result row
  ``{"sample_id", "trajectory", "agent_state", "agent_usage", …}``). The
  trace id is ``trace_id``, else ``id``, else ``sample_id``; ``agent_state``
  becomes ``trace_start`` ``metadata.agent_state`` (for ``memory_block``) and
  ``agent_usage`` its ``usage_statistics`` as ``usage`` events.

A record without an id is the source's default trace (``<source>#2``, … for
later ones). Each record ends with ``trace_end``. An empty list is an empty
trajectory (it is claimed here, as any format would read it as no events).

Mapping (``message_type``): a ``turn_start`` (``step`` = the turn's index)
opens each turn list. ``assistant_message``/``user_message``/
``system_message`` → ``message`` (role ``assistant``/``user``/``system``;
list content is its text parts joined by one space, as letta-evals flattens
it); ``reasoning_message``/``hidden_reasoning_message`` → role
``reasoning``; ``tool_call_message`` → one ``tool_call`` per entry of
``tool_calls``, or its singular ``tool_call`` when that list is empty or
absent (letta-evals' rule); ``arguments`` is kept verbatim in ``args_raw``
and parsed once into ``args``; ``tool_return_message`` → ``tool_result``
(``tool_return``; ``status: "error"`` → ``is_error``);
``usage_statistics`` → ``usage``; ``error_message`` → ``error``. The other
Letta messages (``approval_request_message``, ``approval_response_message``,
``summary_message``, ``event_message``) become ``message`` events with that
role, so that a trajectory holding only them is not "empty" (letta-evals
counts every message). ``stop_reason`` and ``ping`` stream chunks are
skipped; any other ``message_type`` is an input error. ``date`` is the
event time.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from trajgrade._util.depth import decode_bounded
from trajgrade.errors import InputError, Location
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
from trajgrade.formats._fields import BadField, opt_str
from trajgrade.formats._lines import RecordReader
from trajgrade.formats._positions import Positions
from trajgrade.formats._sniff import sniff_trace_id
from trajgrade.formats.vally import parse_timestamp

__all__ = ("FORMAT", "FORMATS", "LettaReader")

_JSON: Final = msgspec.json.Decoder()

_ROLES: Final = {
    "assistant_message": "assistant",
    "user_message": "user",
    "system_message": "system",
    "reasoning_message": "reasoning",
    "hidden_reasoning_message": "reasoning",
    "approval_request_message": "approval_request",
    "approval_response_message": "approval_response",
    "summary_message": "summary",
    "event_message": "event",
}
#: The field holding each message's text, when it has one.
_TEXT: Final = {
    "reasoning_message": "reasoning",
    "hidden_reasoning_message": "hidden_reasoning",
    "approval_response_message": "reason",
    "summary_message": "summary",
}
_SKIPPED: Final = frozenset(("stop_reason", "ping"))
_KNOWN: Final = ", ".join(
    sorted(
        (
            *_ROLES,
            "tool_call_message",
            "tool_return_message",
            "usage_statistics",
            "error_message",
            *_SKIPPED,
        )
    )
)


class _BadMessageError(BadField):
    """One message cannot be read; ``field`` is relative to the message."""


class LettaReader(RecordReader):
    """Translates Letta trajectory records into canonical events."""

    format = "letta"
    expected = "one Letta trajectory"

    def __init__(self, *, source: str, default_trace: str) -> None:
        super().__init__(source=source, default_trace=default_trace)
        self._positions = Positions(self._default)

    def undecodable(self, line: bytes, n: int, exc: Exception) -> InputError:
        # Still a record: later positional trace names stay stable, and the
        # lost trajectory's trace ends in `error`.
        positional = self._positions.next()
        tid = sniff_trace_id(line) or positional
        msg = f"not valid JSON ({exc}); each line must be {self.expected}"
        return self._error(msg, n, trace=tid)

    def record(
        self, record: Any, n: int, events: list[Event], errors: list[InputError]
    ) -> None:
        self._record(record, n, events, errors)

    def _error(
        self, msg: str, n: int, field: str | None = None, trace: str | None = None
    ) -> InputError:
        where = Location(file=self._source, line=n, field=field or None)
        return InputError(msg, location=where, trace_id=trace)

    def _record(
        self, record: Any, n: int, events: list[Event], errors: list[InputError]
    ) -> None:
        tid = self._positions.next()
        prefix, usage, agent_state = "", None, None
        record = _unwrap(record)
        if isinstance(record, dict):
            sample = record.get("sample")
            if (
                isinstance(sample, dict)
                and "sample_id" not in record
                and "id" in sample
            ):
                record = {**record, "sample_id": sample["id"]}
            for key in ("trace_id", "id", "sample_id"):
                value = record.get(key)
                if isinstance(value, str | int) and not isinstance(value, bool):
                    tid = str(value)
                    break
            trajectory = record.get("trajectory")
            prefix, usage = "trajectory", record.get("agent_usage")
            agent_state = record.get("agent_state")
            if not isinstance(trajectory, list):
                msg = "expected `trajectory`: a list of turns, each a list of Letta messages"
                errors.append(self._error(msg, n, "trajectory", tid))
                return
        elif isinstance(record, list):
            trajectory = record
        else:
            msg = f"expected a Letta trajectory (a list of turns, or an object with `trajectory`), got {type(record).__name__}"
            errors.append(self._error(msg, n, trace=tid))
            return
        if trajectory and all(isinstance(m, dict) for m in trajectory):
            turns: list[tuple[str, Any]] = [(prefix, trajectory)]  # one flat turn
        else:
            turns = [(f"{prefix}[{i}]", t) for i, t in enumerate(trajectory)]
        if agent_state is not None:
            events.append(
                TraceStart(trace_id=tid, metadata={"agent_state": agent_state})
            )
        for step, (at, turn) in enumerate(turns):
            if not isinstance(turn, list):
                msg = f"a turn must be a list of Letta messages, got {type(turn).__name__}"
                errors.append(self._error(msg, n, at, tid))
                continue
            events.append(TurnStart(trace_id=tid, step=step))
            for j, message in enumerate(turn):
                self._message(message, tid, n, f"{at}[{j}]", events, errors)
        if isinstance(usage, list):
            for j, message in enumerate(usage):
                self._message(message, tid, n, f"agent_usage[{j}]", events, errors)
        events.append(TraceEnd(trace_id=tid))

    def _message(
        self,
        m: Any,
        tid: str,
        n: int,
        at: str,
        events: list[Event],
        errors: list[InputError],
    ) -> None:
        try:
            if not isinstance(m, dict):
                msg = f"a Letta message must be an object, got {type(m).__name__}"
                raise _BadMessageError(msg)
            events.extend(_translate(m, tid))
        except BadField as exc:
            field = f"{at}.{exc.field}" if exc.field else at
            msg = f"{exc.message}; fix the producer or the line"
            errors.append(self._error(msg, n, field, tid))


def _translate(m: dict[str, Any], tid: str) -> list[Event]:
    """One Letta message -> its canonical events (often one, sometimes none)."""
    kind = opt_str(m, "message_type")
    ts = parse_timestamp(m.get("date"))
    role = _ROLES.get(kind) if kind is not None else None
    if role is not None:
        if kind in _TEXT:
            text = m.get(_TEXT[kind])
            return [Message(trace_id=tid, ts=ts, role=role, text=_plain(text, kind))]
        content = _flatten(m.get("content"), strict=kind == "assistant_message")
        return [Message(trace_id=tid, ts=ts, role=role, text=content)]
    if kind == "tool_call_message":
        calls = m.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            msg = "`tool_calls` must be a list"
            raise _BadMessageError(msg, "tool_calls")
        if calls:
            field = "tool_calls"
        else:
            single = m.get("tool_call")
            calls, field = ([single] if single else []), "tool_call"
        return [
            _call(c, tid, ts, field if field == "tool_call" else f"{field}[{k}]")
            for k, c in enumerate(calls)
        ]
    if kind == "tool_return_message":
        status = m.get("status")
        return [
            ToolResult(
                trace_id=tid,
                ts=ts,
                call_id=opt_str(m, "tool_call_id"),
                name=opt_str(m, "name"),
                result=m.get("tool_return"),
                is_error=None if status is None else status == "error",
            )
        ]
    if kind == "usage_statistics":
        return [_usage(m, tid, ts)]
    if kind == "error_message":
        text = m.get("message") or m.get("detail") or ""
        code = m.get("error_type")
        return [
            AgentError(
                trace_id=tid,
                ts=ts,
                message=str(text),
                code=code if isinstance(code, str) else None,
            )
        ]
    if kind in _SKIPPED:
        return []
    got = "missing" if kind is None else repr(kind)
    msg = f"unknown Letta message_type {got}; expected one of {_KNOWN}"
    raise _BadMessageError(msg, "message_type")


def _plain(value: Any, kind: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        msg = f"{kind}.{_TEXT[kind]} must be a string, got {type(value).__name__}"
        raise _BadMessageError(msg, _TEXT[kind])
    return value


def _flatten(content: Any, *, strict: bool) -> str:
    """Message content as letta-evals flattens it: a string, or text parts
    joined by one space. Assistant parts must all be text (letta-evals would
    fail on others); user/system parts that are not text (images) are skipped."""
    if isinstance(content, str):
        return content
    if content is None and not strict:
        return ""
    if not isinstance(content, list):
        got = type(content).__name__
        msg = f"content must be a string or a list of text parts, got {got}"
        raise _BadMessageError(msg, "content")
    texts = []
    for k, part in enumerate(content):
        text = part.get("text") if isinstance(part, dict) else None
        if isinstance(text, str):
            texts.append(text)
        elif strict:
            msg = "an assistant content part must be a text part ({type: text, text})"
            raise _BadMessageError(msg, f"content[{k}]")
    return " ".join(texts)


def _call(c: Any, tid: str, ts: float | None, field: str) -> ToolCall:
    if not isinstance(c, dict) or not isinstance(c.get("name"), str):
        msg = "a tool call must be an object with a string `name`"
        raise _BadMessageError(msg, field)
    raw = c.get("arguments")
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
        raise _BadMessageError(msg, f"{field}.arguments")
    return ToolCall(
        trace_id=tid,
        ts=ts,
        name=c["name"],
        call_id=opt_str(c, "tool_call_id", f"{field}."),
        args=args,
        args_raw=raw,
    )


def _count(d: dict[str, Any], *keys: str) -> int:
    """The first positive count among ``keys`` (letta-evals' fallbacks)."""
    for key in keys:
        node: Any = d
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, int) and not isinstance(node, bool) and node > 0:
            return node
    return 0


def _usage(m: dict[str, Any], tid: str, ts: float | None) -> Usage:
    # The same fields and fallbacks as letta_evals.utils.extract_token_counts.
    return Usage(
        trace_id=tid,
        ts=ts,
        input_tokens=_count(m, "prompt_tokens"),
        output_tokens=_count(m, "completion_tokens"),
        cache_read_tokens=_count(
            m,
            "cached_input_tokens",
            "prompt_tokens_details.cached_tokens",
            "prompt_tokens_details.cache_read_tokens",
            "prompt_tokens_details.cached_input_tokens",
        ),
        cache_write_tokens=_count(
            m, "cache_write_tokens", "prompt_tokens_details.cache_creation_tokens"
        ),
        reasoning_tokens=_count(
            m, "reasoning_tokens", "completion_tokens_details.reasoning_tokens"
        ),
    )


class _LettaFormat:
    name = "letta"
    summary = "Letta trajectories: [[messages per turn]], a flat message list, or {trace_id|sample_id, trajectory, agent_state?} (letta-evals)"

    def sniff(self, record: object) -> bool:
        record = _unwrap(record)
        if isinstance(record, dict):
            trajectory = record.get("trajectory")
            if not isinstance(trajectory, list) or "history" in record:
                return False  # a SWE-agent .traj has `history` and `trajectory`
            first = trajectory[0] if trajectory else []
            # Letta turns are lists (or message dicts); SWE-agent steps are
            # dicts with `action`/`observation`.
            return isinstance(first, list) or (
                isinstance(first, dict)
                and "action" not in first
                and "observation" not in first
            )
        if not isinstance(record, list):
            return False
        for item in record:
            if isinstance(item, dict):
                return "message_type" in item
            if not isinstance(item, list):
                return False
            if item:
                return isinstance(item[0], dict) and "message_type" in item[0]
        return True  # [] or [[], …]: an empty trajectory

    def reader(self, *, source: str, default_trace: str) -> LettaReader:
        return LettaReader(source=source, default_trace=default_trace)


FORMAT: Final = _LettaFormat()

#: What this module contributes to the registry.
FORMATS: Final = (FORMAT,)


def _unwrap(record: Any) -> Any:
    """letta-evals writes result rows as ``{"type": "result", "result": {...}}``
    (its streamed results file); the row is the inner object."""
    if isinstance(record, dict) and record.get("type") == "result":
        inner = record.get("result")
        if isinstance(inner, dict) and isinstance(inner.get("trajectory"), list):
            return inner
    return record
