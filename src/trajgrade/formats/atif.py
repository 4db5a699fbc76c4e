"""Harbor ATIF trajectories (``agent/trajectory.json``, ATIF-v1.5 to v1.7).

One JSON document per trajectory, usually pretty-printed: ``schema_version``,
``session_id``, ``agent{name, version, model_name}``, ``steps[]``,
``final_metrics`` and, for a run continued in another file,
``continued_trajectory_ref``. It is read incrementally (see ``_document``):
each step's events come out when the step's object closes, and memory stays
flat in the document's size.

Mapping (per step, all events carry the step's ``timestamp`` and ``step_id``):

* the first step is preceded by ``trace_start`` (``schema_version``,
  ``agent``, ``agent_version``, ``model`` from the document, when read);
* ``source: "agent"`` → ``turn_start`` (source ``agent``), then ``message``
  role ``reasoning`` (``reasoning_content``) and role ``assistant``
  (``message``); ``user`` / ``system`` steps → ``message`` of that role;
* ``tool_calls[]`` → ``tool_call`` (``tool_call_id``, ``function_name``; an
  object ``arguments`` is ``args``, a string one is kept in ``args_raw`` and
  parsed once; a string ``extra.raw_arguments`` is kept in ``args_raw``);
* ``observation.results[]`` → ``tool_result`` (``content`` as written);
* ``metrics`` → ``usage``;
* the end of the document → ``trace_end``.

Decisions:

1. Trace id = ``session_id`` when the parser has passed it before the first
   event (Harbor writes it second); otherwise the source's default trace,
   for the whole document.
2. Turns: one ``turn_start`` per agent step, i.e. per model call, as vally's
   ATIF adapter does; ``user`` steps are messages, not turns.
3. Pairing: a result with ``source_call_id`` is that call's result (an id
   that names no call of the step is kept as written, so the engine reports
   it). A result without one (terminus-2 writes none) answers every call of
   its step still unanswered, each getting the same ``content`` (the screen
   after all of the step's commands). A result left with no call to answer
   (terminus-2's parse-error feedback) is a ``message`` role ``tool``. Calls
   without results stay unanswered; nothing is invented.
4. Errors: ATIF has no error field, so ``is_error`` is left unset (unknown);
   failures are only in the text.
5. Usage: per-step ``metrics`` (``prompt_tokens`` → ``input_tokens``, which
   ATIF already counts with cached tokens; ``cached_tokens`` →
   ``cache_read_tokens``; ``completion_tokens``; ``cost_usd``).
   ``final_metrics`` is used only when no step has metrics (then one ``usage``
   before ``trace_end``): Harbor's totals also count subagent trajectories,
   which are files of their own. Metrics of ``is_copied_context`` steps are
   skipped (they were counted where they happened).
6. Copied context (``is_copied_context``, in subagent and continuation
   files) is emitted like any other step: it is part of the trajectory as
   written, and tool-call counts match the file. Subagent references
   (``subagent_trajectory_ref``) are not followed: each file is one trace.
7. A whole document is a finished trace: its end emits ``trace_end``. A
   truncated or invalid document keeps the events of the steps read before
   the break, reports the break (charged to the trace) and emits no
   ``trace_end``: the run was not seen to finish.
8. A step that is not an object, or a field of the wrong type (a tool call
   without ``function_name``, non-integer token counts), is an input error
   for the trace; the rest of the step is still read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from trajgrade.events import (
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
from trajgrade.formats._fields import finite
from trajgrade.formats.vally import parse_timestamp

if TYPE_CHECKING:
    from trajgrade.errors import InputError
    from trajgrade.formats._document import DocShape

__all__ = ("FORMAT", "FORMATS", "AtifReader")

_ROLES: Final = {"agent": "assistant", "user": "user", "system": "system"}


class AtifReader(DocumentReader):
    """Translates one ATIF document to canonical events, step by step."""

    format = "atif"
    ITEMS = ("agent", "steps.item", "final_metrics")
    SCALARS = ("schema_version", "session_id")

    def __init__(self, *, source: str, default_trace: str) -> None:
        super().__init__(source=source, default_trace=default_trace)
        self._trace: str | None = None
        self._agent: dict[str, Any] = {}
        self._totals: dict[str, Any] | None = None
        self._metered = False

    @property
    def trace_id(self) -> str:
        """The trace: fixed by the first event, else ``session_id`` if read."""
        if self._trace is not None:
            return self._trace
        sid = self.scalars.get("session_id")
        return sid if isinstance(sid, str) and sid else self._default

    def item(
        self, prefix: str, obj: Any, events: list[Event], errors: list[InputError]
    ) -> None:
        """One ``agent`` object, step, or ``final_metrics`` object."""
        if prefix == "agent":
            if isinstance(obj, dict):
                self._agent = obj
        elif prefix == "final_metrics":
            if isinstance(obj, dict):
                self._totals = obj
        elif isinstance(obj, dict):
            self._step(obj, events, errors)
        else:
            self._start(events)
            errors.append(self._bad("each step must be an object", "steps"))

    def end(self, events: list[Event], errors: list[InputError]) -> None:
        """A complete document is a finished trace (decision 7)."""
        if self.broken:
            return
        tid = self._start(events)
        if not self._metered and self._totals is not None:
            self._usage(self._totals, "final_metrics", tid, None, None, events, errors)
        events.append(TraceEnd(trace_id=tid))

    # ------------------------------------------------------------ steps
    def _start(self, events: list[Event]) -> str:
        if self._trace is None:
            self._trace = self.trace_id
            meta = {
                "schema_version": self.scalars.get("schema_version"),
                "agent": self._agent.get("name"),
                "agent_version": self._agent.get("version"),
                "model": self._agent.get("model_name"),
            }
            kept = {k: v for k, v in meta.items() if isinstance(v, str)}
            events.append(TraceStart(trace_id=self._trace, metadata=kept or None))
        return self._trace

    def _step(
        self, step: dict[str, Any], events: list[Event], errors: list[InputError]
    ) -> None:
        tid = self._start(events)
        ts = parse_timestamp(step.get("timestamp"))
        n = step.get("step_id")
        sid = n if isinstance(n, int) and not isinstance(n, bool) else None
        source = step.get("source")
        if source == "agent":
            events.append(TurnStart(trace_id=tid, ts=ts, step=sid, source="agent"))
            reasoning = text_of(step.get("reasoning_content"))
            if reasoning:
                events.append(
                    Message(
                        trace_id=tid, ts=ts, step=sid, role="reasoning", text=reasoning
                    )
                )
        text = text_of(step.get("message"))
        if text:
            role = _ROLES.get(source, source) if isinstance(source, str) else "system"
            events.append(Message(trace_id=tid, ts=ts, step=sid, role=role, text=text))
        calls = self._calls(step.get("tool_calls"), tid, ts, sid, events, errors)
        self._results(step.get("observation"), calls, tid, ts, sid, events)
        metrics = step.get("metrics")
        if isinstance(metrics, dict) and step.get("is_copied_context") is not True:
            self._metered = True
            model = step.get("model_name")
            self._usage(
                metrics,
                "metrics",
                tid,
                ts,
                sid,
                events,
                errors,
                model=model if isinstance(model, str) and model else None,
            )

    def _calls(
        self,
        raw: Any,
        tid: str,
        ts: float | None,
        sid: int | None,
        events: list[Event],
        errors: list[InputError],
    ) -> list[ToolCall]:
        calls: list[ToolCall] = []
        for call in raw if isinstance(raw, list) else ():
            name = call.get("function_name") if isinstance(call, dict) else None
            if not isinstance(name, str) or not name:
                msg = "a tool call must be an object with a string function_name"
                errors.append(self._bad(msg, "tool_calls"))
                continue
            cid = call.get("tool_call_id")
            args, args_raw = parse_args(call.get("arguments"))
            extra = call.get("extra")
            if args_raw is None and isinstance(extra, dict):
                raw_args = extra.get("raw_arguments")
                args_raw = raw_args if isinstance(raw_args, str) else None
            tc = ToolCall(
                trace_id=tid,
                ts=ts,
                step=sid,
                name=name,
                call_id=cid if isinstance(cid, str) else None,
                args=args,
                args_raw=args_raw,
            )
            calls.append(tc)
            events.append(tc)
        return calls

    def _results(
        self,
        observation: Any,
        calls: list[ToolCall],
        tid: str,
        ts: float | None,
        sid: int | None,
        events: list[Event],
    ) -> None:
        raw = observation.get("results") if isinstance(observation, dict) else None
        names = {c.call_id: c.name for c in calls if c.call_id is not None}
        open_calls = list(calls)
        loose: list[Any] = []
        for result in raw if isinstance(raw, list) else ():
            if not isinstance(result, dict):
                continue
            src = result.get("source_call_id")
            if not isinstance(src, str):
                loose.append(result.get("content"))
                continue
            open_calls = [c for c in open_calls if c.call_id != src]
            events.append(
                ToolResult(
                    trace_id=tid,
                    ts=ts,
                    step=sid,
                    call_id=src,
                    name=names.get(src),
                    result=result.get("content"),
                )
            )
        for content in loose:  # decision 3: pair by step
            if open_calls:
                events.extend(
                    ToolResult(
                        trace_id=tid,
                        ts=ts,
                        step=sid,
                        call_id=c.call_id,
                        name=c.name,
                        result=content,
                    )
                    for c in open_calls
                )
                open_calls.clear()
            elif text := text_of(content):
                events.append(
                    Message(trace_id=tid, ts=ts, step=sid, role="tool", text=text)
                )

    def _usage(
        self,
        metrics: dict[str, Any],
        field: str,
        tid: str,
        ts: float | None,
        sid: int | None,
        events: list[Event],
        errors: list[InputError],
        *,
        model: str | None = None,
    ) -> None:
        """``metrics`` (a step's) or ``final_metrics`` (its keys have a
        ``total_`` prefix) as one usage event."""
        pre = "total_" if field == "final_metrics" else ""
        bad: list[str] = []
        cost = metrics.get(f"{pre}cost_usd")
        events.append(
            Usage(
                trace_id=tid,
                ts=ts,
                step=sid,
                input_tokens=count(metrics, f"{pre}prompt_tokens", bad),
                output_tokens=count(metrics, f"{pre}completion_tokens", bad),
                cache_read_tokens=count(metrics, f"{pre}cached_tokens", bad),
                cost_usd=finite(cost),
                model=model or _text(self._agent.get("model_name")),
            )
        )
        errors.extend(
            self._bad(f"{key} must be a non-negative integer", f"{field}.{key}")
            for key in bad
        )

    def _bad(self, message: str, field: str) -> InputError:
        return self.error(message, field=field, trace=self.trace_id)


class _AtifFormat:
    name = "atif"
    summary = "Harbor ATIF trajectories (agent/trajectory.json, ATIF-v1.5 to v1.7), one JSON document read incrementally"

    def sniff(self, record: object) -> bool:
        """ATIF is a document format: lines are never ATIF records."""
        return False

    def sniff_document(self, shape: DocShape) -> bool:
        """A top-level object with ``steps`` whose first step has a
        ``step_id`` (or, for an empty trajectory, ``schema_version`` and
        ``session_id`` beside ``steps``)."""
        if shape.is_array or "steps" not in shape.top_keys:
            return False
        return (
            "step_id" in shape.first_item_keys
            or {
                "schema_version",
                "session_id",
            }
            <= shape.top_keys
        )

    def reader(self, *, source: str, default_trace: str) -> AtifReader:
        return AtifReader(source=source, default_trace=default_trace)


FORMAT: Final = _AtifFormat()

#: What this module contributes to the registry.
FORMATS: Final = (FORMAT,)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
