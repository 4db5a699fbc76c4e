"""Gemini CLI chat sessions (``~/.gemini/tmp/<project>/chats/session-<ts>-<id>.json``).

One JSON document, pretty-printed: ``sessionId``, ``projectHash``,
``startTime``, ``lastUpdated``, ``messages[]`` (read from Gemini CLI's
Oct 2025 files). It is read incrementally (see ``_document``): each
message's events come out when its object closes.

Mapping (per message, all events carry its ``timestamp``):

* the first message is preceded by ``trace_start`` (``project_hash``,
  ``start_time``);
* ``type: "user"`` → ``message`` role ``user`` (``content``: a string, or
  the ``text`` of its parts);
* ``type: "gemini"`` (one model response) → ``turn_start`` (source
  ``agent``), ``message`` role ``reasoning`` per ``thoughts`` entry
  (``subject: description``), ``message`` role ``assistant``
  (``content``), per ``toolCalls`` entry a ``tool_call`` (``id``, ``name``,
  ``args``; a string ``args`` is kept in ``args_raw`` and parsed once) and a
  ``tool_result``, then ``usage`` (``tokens``);
* ``type: "error"`` → ``error`` (``content``);
* the end of the document → ``trace_end``.

Decisions:

1. Trace id = ``sessionId`` when read before the first event (Gemini CLI
   writes it first); otherwise the source's default trace.
2. Turns: one ``turn_start`` per ``gemini`` message, i.e. per model
   response, as for ATIF agent steps (vally's convention), so turn budgets
   mean the same for both document formats.
3. A tool call and its result are one object (paired by construction). The
   result is the ``functionResponse.response``'s ``output`` (or ``error``)
   when it is the only key of the only part, else the ``result`` list as
   written; ``is_error`` = ``status`` other than ``success`` (``error``,
   ``cancelled``). A call with neither ``result`` nor a final ``status``
   stays unanswered.
4. Usage per ``gemini`` message: ``input_tokens`` = ``input`` (which counts
   cached tokens) + ``tool`` (tool-use prompt tokens); ``output_tokens`` =
   ``output`` + ``thoughts``, ``reasoning_tokens`` = ``thoughts``,
   ``cache_read_tokens`` = ``cached`` (so the sum is ``total``).
5. ``info`` / ``warning`` messages (CLI notices, not model context) and
   unknown types are skipped.
6. A whole document is a finished trace: its end emits ``trace_end``. A
   truncated or invalid document keeps the events read before the break,
   reports it (charged to the trace) and emits no ``trace_end``.
7. A message that is not an object, or a tool call without a string
   ``name`` or with a ``status`` that is not a string, is an input error
   for the trace (the call is skipped); reading goes on.
8. The append-only JSONL session files of newer builds (a header line, then
   message and ``{"$set": …}`` records) are not this format: their header
   line has no ``messages`` and is not claimed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

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
from trajgrade.formats._atif_fields import count, parse_args, text_of
from trajgrade.formats._document import DocumentReader
from trajgrade.formats._fields import BadField, opt_str
from trajgrade.formats.vally import parse_timestamp

if TYPE_CHECKING:
    from trajgrade.errors import InputError
    from trajgrade.formats._document import DocShape

__all__ = ("FORMAT", "FORMATS", "GeminiCliReader")

#: Tool-call statuses that mean the call is over.
_FINAL: Final = frozenset(("success", "error", "cancelled"))


def _model(msg: dict[str, Any]) -> str | None:
    """The ``model`` a message names (Gemini CLI writes it on each response)."""
    model = msg.get("model")
    return model if isinstance(model, str) and model else None


def _result_of(raw: Any) -> Any:
    """The tool's output as decision 3 says."""
    if isinstance(raw, list) and len(raw) == 1 and isinstance(raw[0], dict):
        response = raw[0].get("functionResponse", {})
        body = response.get("response") if isinstance(response, dict) else None
        if isinstance(body, dict) and len(body) == 1:
            key = next(iter(body))
            if key in ("output", "error"):
                return body[key]
    return raw


def call_event(
    call: dict[str, Any], name: str, call_id: str | None, tid: str, ts: float | None
) -> ToolCall:
    """A ``toolCalls`` entry as a ``tool_call`` (its own timestamp, else ``ts``)."""
    args, args_raw = parse_args(call.get("args"))
    return ToolCall(
        trace_id=tid,
        ts=parse_timestamp(call.get("timestamp")) or ts,
        name=name,
        call_id=call_id,
        args=args,
        args_raw=args_raw,
    )


def result_event(
    call: dict[str, Any], name: str, call_id: str | None, tid: str, ts: float | None
) -> ToolResult:
    """A finished ``toolCalls`` entry's ``tool_result`` (decision 3)."""
    status = call.get("status")
    return ToolResult(
        trace_id=tid,
        ts=parse_timestamp(call.get("timestamp")) or ts,
        call_id=call_id,
        name=name,
        result=_result_of(call.get("result")),
        is_error=status != "success" if isinstance(status, str) else None,
    )


class GeminiCliReader(DocumentReader):
    """Translates one Gemini CLI session document to canonical events."""

    format = "gemini-cli"
    ITEMS = ("messages.item",)
    SCALARS = ("sessionId", "projectHash", "startTime")

    def __init__(self, *, source: str, default_trace: str) -> None:
        super().__init__(source=source, default_trace=default_trace)
        self._trace: str | None = None

    @property
    def trace_id(self) -> str:
        """The trace: fixed by the first event, else ``sessionId`` if read."""
        if self._trace is not None:
            return self._trace
        sid = self.scalars.get("sessionId")
        return sid if isinstance(sid, str) and sid else self._default

    def item(
        self, prefix: str, obj: Any, events: list[Event], errors: list[InputError]
    ) -> None:
        """One finished message."""
        tid = self._start(events)
        if not isinstance(obj, dict):
            errors.append(self._bad("each message must be an object", "messages"))
            return
        ts = parse_timestamp(obj.get("timestamp"))
        kind = obj.get("type")
        if kind == "user":
            text = text_of(obj.get("content"))
            if text:
                events.append(Message(trace_id=tid, ts=ts, role="user", text=text))
        elif kind == "gemini":
            self._response(obj, tid, ts, events, errors)
        elif kind == "error":
            msg = text_of(obj.get("content"))
            events.append(AgentError(trace_id=tid, ts=ts, message=msg))

    def end(self, events: list[Event], errors: list[InputError]) -> None:
        """A complete document is a finished trace (decision 6)."""
        if not self.broken:
            events.append(TraceEnd(trace_id=self._start(events)))

    def _start(self, events: list[Event]) -> str:
        if self._trace is None:
            self._trace = self.trace_id
            meta = {
                "project_hash": self.scalars.get("projectHash"),
                "start_time": self.scalars.get("startTime"),
            }
            kept = {k: v for k, v in meta.items() if isinstance(v, str)}
            events.append(TraceStart(trace_id=self._trace, metadata=kept or None))
        return self._trace

    def _response(
        self,
        msg: dict[str, Any],
        tid: str,
        ts: float | None,
        events: list[Event],
        errors: list[InputError],
    ) -> None:
        events.append(TurnStart(trace_id=tid, ts=ts, source="agent"))
        thoughts = msg.get("thoughts")
        for t in thoughts if isinstance(thoughts, list) else ():
            if not isinstance(t, dict):
                continue
            parts = [t.get("subject"), t.get("description")]
            text = ": ".join(p for p in parts if isinstance(p, str) and p)
            if text:
                when = parse_timestamp(t.get("timestamp")) or ts
                events.append(
                    Message(trace_id=tid, ts=when, role="reasoning", text=text)
                )
        text = text_of(msg.get("content"))
        if text:
            events.append(Message(trace_id=tid, ts=ts, role="assistant", text=text))
        calls = msg.get("toolCalls")
        for i, call in enumerate(calls if isinstance(calls, list) else ()):
            self._call(call, i, tid, ts, events, errors)
        tokens = msg.get("tokens")
        if isinstance(tokens, dict):
            bad: list[str] = []
            thinking = count(tokens, "thoughts", bad)
            events.append(
                Usage(
                    trace_id=tid,
                    ts=ts,
                    input_tokens=count(tokens, "input", bad)
                    + count(tokens, "tool", bad),
                    output_tokens=count(tokens, "output", bad) + thinking,
                    cache_read_tokens=count(tokens, "cached", bad),
                    reasoning_tokens=thinking,
                    model=_model(msg),
                )
            )
            errors.extend(
                self._bad(f"{key} must be a non-negative integer", f"tokens.{key}")
                for key in bad
            )

    def _call(
        self,
        call: Any,
        i: int,
        tid: str,
        ts: float | None,
        events: list[Event],
        errors: list[InputError],
    ) -> None:
        name = call.get("name") if isinstance(call, dict) else None
        if not isinstance(call, dict) or not isinstance(name, str) or not name:
            msg = "a tool call must be an object with a string name"
            errors.append(self._bad(msg, "toolCalls"))
            return
        try:
            status = opt_str(call, "status", f"toolCalls[{i}].")
        except BadField as exc:
            errors.append(self._bad(exc.message, exc.field or "toolCalls"))
            return
        cid = call.get("id")
        call_id = cid if isinstance(cid, str) else None
        events.append(call_event(call, name, call_id, tid, ts))
        if call.get("result") is None and status not in _FINAL:
            return  # decision 3: still running when the file was written
        events.append(result_event(call, name, call_id, tid, ts))

    def _bad(self, message: str, field: str) -> InputError:
        return self.error(message, field=field, trace=self.trace_id)


class _GeminiCliFormat:
    name = "gemini-cli"
    summary = "Gemini CLI chat sessions (~/.gemini/tmp/<project>/chats/session-*.json), one JSON document read incrementally"

    def sniff(self, record: object) -> bool:
        """A document format: lines are never Gemini CLI session records."""
        return False

    def sniff_document(self, shape: DocShape) -> bool:
        """A top-level object with ``sessionId`` and ``messages``."""
        return not shape.is_array and {"sessionId", "messages"} <= shape.top_keys

    def reader(self, *, source: str, default_trace: str) -> GeminiCliReader:
        return GeminiCliReader(source=source, default_trace=default_trace)


FORMAT: Final = _GeminiCliFormat()

#: What this module contributes to the registry.
FORMATS: Final = (FORMAT,)
