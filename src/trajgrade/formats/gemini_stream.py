"""Gemini CLI ``--output-format stream-json`` (``gemini -p … --output-format stream-json``).

One JSON record per line, read from the recording of Gemini CLI 0.61.0 in
the shared corpus (``gemini-cli-live/stream.jsonl``)::

    init        {session_id, model}
    message     {role: "user" | "assistant", content, delta: true}
    tool_use    {tool_name, tool_id, parameters}
    tool_result {tool_id, status: "success" | "error", output, error?: {type, message}}
    error       {severity?, message}
    result      {status, stats: {total_tokens, input_tokens, output_tokens, cached, duration_ms, tool_calls, …}}

Mapping:

* ``init`` → ``trace_start`` (``model``); its ``session_id`` is the trace id
  of the records that follow (records before any ``init`` belong to the
  source's default trace);
* ``message`` role ``user`` → ``message`` role ``user``;
* an agent response (the assistant text chunks and tool calls between two
  user messages or tool results) → one ``turn_start`` (source ``agent``) when
  it begins; its ``delta`` chunks are joined into one ``message`` role
  ``assistant``, emitted when the response's text ends (a tool call, a
  result, another record, or end of input);
* ``tool_use`` → ``tool_call`` (``tool_id``; ``parameters`` as the args);
* ``tool_result`` → ``tool_result`` paired by ``tool_id`` (never by
  position), ``is_error`` when ``status`` is not ``success``, the result is
  ``output`` (or the error's ``message``). A shell command that exits
  non-zero is still ``success`` here: the exit code is only in its text;
* ``error`` → ``error``;
* ``result`` → ``usage`` from ``stats`` (``input_tokens`` includes
  ``cached``, which is also ``cache_read_tokens``), then ``trace_end``
  (``is_error`` unless ``status`` is ``success``).

Decisions: token usage exists only as the run's total in ``result``, so it
is counted once, at the end: a token budget fails no earlier than the run's
last record in this format (the session file formats report usage per
response). A line that is not an object, a ``tool_use`` without a string
``tool_name`` or a bad token count is a located input error for the trace;
reading goes on. Unknown record types are skipped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

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
from trajgrade.formats._lines import RecordReader
from trajgrade.formats.vally import parse_timestamp as parse_ts

if TYPE_CHECKING:
    from trajgrade.errors import InputError
    from trajgrade.events import Event

__all__ = ("FORMAT", "FORMATS", "GeminiStreamReader")

#: How many open tool ids are kept to name results (a bounded state).
_OPEN_MAX: Final = 1024


def _stats_model(stats: dict[str, Any]) -> str | None:
    """The model of a ``result``'s totals: the one key of ``stats.models``
    (``init`` names the requested model, often the router alias ``auto``);
    None when several models shared the run."""
    models = stats.get("models")
    if isinstance(models, dict) and len(models) == 1:
        (name,) = models
        return name if isinstance(name, str) and name else None
    return None


class GeminiStreamReader(RecordReader):
    """Reads ``gemini -p --output-format stream-json`` output."""

    format = "gemini-stream-json"
    expected = "a Gemini CLI stream-json record (a JSON object with a 'type')"

    def __init__(self, *, source: str, default_trace: str) -> None:
        super().__init__(source=source, default_trace=default_trace)
        self._trace = ""
        self._in_response = False
        self._text: list[str] = []
        self._text_ts: float | None = None
        self._names: dict[str, str] = {}

    def record(
        self, record: Any, n: int, events: list[Event], errors: list[InputError]
    ) -> None:
        if not isinstance(record, dict):
            msg = f"expected {self.expected}, got {type(record).__name__}"
            errors.append(self.error(msg, n, trace=self._trace or self._default))
            return
        kind = record.get("type")
        ts = parse_ts(record.get("timestamp"))
        if kind == "message" and record.get("role") == "assistant":
            self._chunk(record, ts, events)
            return
        self._end_text(events)
        if kind == "init":
            self._init(record, ts, events)
        elif kind == "message":
            self._in_response = False
            self._message(record, ts, events)
        elif kind == "tool_use":
            self._tool_use(record, n, ts, events, errors)
        elif kind == "tool_result":
            self._in_response = False
            self._tool_result(record, ts, events)
        elif kind == "error":
            self._agent_error(record, ts, events)
        elif kind == "result":
            self._result(record, n, ts, events, errors)

    def close(self) -> tuple[list[Event], list[InputError]]:
        events: list[Event] = []
        self._end_text(events)
        return events, []

    def flush_trace(self, trace_id: str) -> list[Event]:
        """The assistant text held, if it is ``trace_id``'s (being closed)."""
        events: list[Event] = []
        if trace_id == (self._trace or self._default):
            self._end_text(events)
        return events

    # ------------------------------------------------------------ records
    def _respond(self, ts: float | None, events: list[Event]) -> None:
        if not self._in_response:
            self._in_response = True
            events.append(TurnStart(trace_id=self._trace, ts=ts, source="agent"))

    def _chunk(
        self, record: dict[str, Any], ts: float | None, events: list[Event]
    ) -> None:
        """An assistant ``delta`` chunk: held until the response's text ends."""
        self._respond(ts, events)
        content = record.get("content")
        if isinstance(content, str) and content:
            if not self._text:
                self._text_ts = ts
            self._text.append(content)

    def _init(
        self, record: dict[str, Any], ts: float | None, events: list[Event]
    ) -> None:
        sid = record.get("session_id")
        if isinstance(sid, str) and sid:
            self._trace = sid
        self._in_response = False
        model = record.get("model")
        meta = {"model": model} if isinstance(model, str) else None
        events.append(TraceStart(trace_id=self._trace, ts=ts, metadata=meta))

    def _message(
        self, record: dict[str, Any], ts: float | None, events: list[Event]
    ) -> None:
        content = record.get("content")
        role = record.get("role")
        events.append(
            Message(
                trace_id=self._trace,
                ts=ts,
                role=role if isinstance(role, str) else "user",
                text=content if isinstance(content, str) else "",
            )
        )

    def _agent_error(
        self, record: dict[str, Any], ts: float | None, events: list[Event]
    ) -> None:
        message = record.get("message")
        severity = record.get("severity")
        events.append(
            AgentError(
                trace_id=self._trace,
                ts=ts,
                message=message if isinstance(message, str) else str(record),
                code=severity if isinstance(severity, str) else None,
            )
        )

    def _end_text(self, events: list[Event]) -> None:
        if self._text:
            events.append(
                Message(
                    trace_id=self._trace,
                    ts=self._text_ts,
                    role="assistant",
                    text="".join(self._text),
                )
            )
            self._text.clear()

    def _tool_use(
        self,
        record: dict[str, Any],
        n: int,
        ts: float | None,
        events: list[Event],
        errors: list[InputError],
    ) -> None:
        name = record.get("tool_name")
        if not isinstance(name, str) or not name:
            msg = "a tool_use needs a string 'tool_name'; the call is skipped"
            errors.append(
                self.error(
                    msg, n, field="tool_name", trace=self._trace or self._default
                )
            )
            return
        self._respond(ts, events)
        cid = record.get("tool_id")
        cid = cid if isinstance(cid, str) and cid else None
        params = record.get("parameters")
        if cid is not None:
            if len(self._names) >= _OPEN_MAX:
                del self._names[next(iter(self._names))]
            self._names[cid] = name
        events.append(
            ToolCall(
                trace_id=self._trace,
                ts=ts,
                name=name,
                call_id=cid,
                args=params if isinstance(params, dict) else None,
            )
        )

    def _tool_result(
        self, record: dict[str, Any], ts: float | None, events: list[Event]
    ) -> None:
        cid = record.get("tool_id")
        cid = cid if isinstance(cid, str) and cid else None
        failed = record.get("status") != "success"
        result = record.get("output")
        err = record.get("error")
        if result is None and isinstance(err, dict):
            result = err.get("message")
        events.append(
            ToolResult(
                trace_id=self._trace,
                ts=ts,
                call_id=cid,
                name=self._names.pop(cid, None) if cid is not None else None,
                result=result,
                is_error=failed,
            )
        )

    def _result(
        self,
        record: dict[str, Any],
        n: int,
        ts: float | None,
        events: list[Event],
        errors: list[InputError],
    ) -> None:
        tid = self._trace
        stats = record.get("stats")
        if isinstance(stats, dict):
            counts = {}
            for key in ("input_tokens", "output_tokens", "cached"):
                value = stats.get(key, 0)
                if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    msg = f"stats.{key} must be a non-negative integer, got {value!r}; usage is not counted"
                    errors.append(
                        self.error(
                            msg, n, field=f"stats.{key}", trace=tid or self._default
                        )
                    )
                    break
                counts[key] = value
            else:
                events.append(
                    Usage(
                        trace_id=tid,
                        ts=ts,
                        input_tokens=counts["input_tokens"],
                        output_tokens=counts["output_tokens"],
                        cache_read_tokens=counts["cached"],
                        model=_stats_model(stats),
                    )
                )
        status = record.get("status")
        events.append(
            TraceEnd(trace_id=tid, ts=ts, result=status, is_error=status != "success")
        )
        self._in_response = False


class _GeminiStreamFormat:
    name = "gemini-stream-json"
    summary = "Gemini CLI `gemini -p --output-format stream-json` output (init, message, tool_use, tool_result, result)"

    def sniff(self, record: object) -> bool:
        """The ``init`` record: a ``session_id`` and a ``model``, no ``subtype``
        (Claude Code's stream-json starts with ``system``/``init``)."""
        return (
            isinstance(record, dict)
            and record.get("type") == "init"
            and isinstance(record.get("session_id"), str)
            and "model" in record
            and "subtype" not in record
        )

    def reader(self, *, source: str, default_trace: str) -> GeminiStreamReader:
        return GeminiStreamReader(source=source, default_trace=default_trace)


FORMAT: Final = _GeminiStreamFormat()

#: What this module contributes to the registry.
FORMATS: Final = (FORMAT,)
