"""OpenAI Codex CLI logs: session rollouts and ``codex exec --json`` output.

Three line layouts, told apart line by line (one reader reads them all):

* **rollout** (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``, 0.40 to
  0.169 seen): ``{"timestamp", "type", "payload"}`` with ``type`` one of
  ``session_meta``, ``response_item``, ``event_msg``, ``turn_context``,
  ``compacted`` (later versions add more, e.g. ``world_state``, which are
  skipped);
* **bare rollout** (before September 2025; no real file found, built from
  descriptions of Codex's source): a header ``{"id", "timestamp",
  "instructions"?, "git"?}``, then Responses items without an envelope and
  ``{"record_type": "state"}`` markers (skipped);
* **exec** (``codex exec --json`` stdout): ``thread.started``,
  ``turn.started``, ``item.started|updated|completed``, ``turn.completed``,
  ``turn.failed``, ``error``; no timestamps.

Mapping and decisions (docs/formats.md, "codex", gives the reasons):

1. Trace id: ``session_meta.id`` (rollout), the header's ``id`` (bare),
   ``thread.started.thread_id`` (exec); before one is seen, the source's
   default trace. Each new id emits ``trace_start`` (rollout metadata:
   ``cwd``, ``originator``, ``cli_version``, ``source``, ``model_provider``,
   ``git``; never the instructions) and resets turn and usage state, so a
   file holding several sessions gives several traces. No line ends a trace:
   the end of input does (a turn end is not a trace end).
2. Tool calls: ``function_call`` (``arguments`` JSON text parsed once into
   ``args``, kept in ``args_raw``), ``custom_tool_call`` (free-text ``input``
   in ``args_raw``), ``local_shell_call`` (name ``local_shell``, ``action`` as
   ``args``), ``web_search_call`` (name ``web_search``, ``action`` as
   ``args``, no call id: Codex writes no result for it, so it is neither paired
   nor reported unanswered). Names as Codex wrote them (``mcp__server__tool``
   kept). Results (``function_call_output``, ``custom_tool_call_output``,
   ``local_shell_call_output``) carry their ``call_id``: pairing is by id, and
   calls without output stay unanswered (no result is invented).
3. Tool errors, per output shape: ≤ 0.40 JSON-wrapped output → its
   ``output`` text, ``metadata.exit_code`` ≠ 0, ``duration_seconds``; ≥ 0.104
   text with a header → the text as written, ``Process exited with code N`` /
   ``Exit code: N`` ≠ 0, ``Wall time``; the refusal texts Codex writes
   (PreToolUse hook block, sandbox denial, rejected patch) → ``is_error``;
   otherwise no flag. ``exec_command_end``/``patch_apply_end`` and 0.169's
   ``item_completed`` tool items are not read: the output carries the same
   status.
4. Messages: ``response_item`` ``message`` → ``message`` for roles
   ``assistant``, ``developer``, ``system``. Prompts come from
   ``event_msg`` ``user_message`` (≤ 0.128) or ``item_completed`` with a
   ``UserMessage`` item (0.169), whichever a session uses first (a
   ``user_message`` whose ``kind`` is not ``plain`` announced injected
   context in ≤ 0.40 and is skipped); rollout
   ``user`` items are skipped, as they repeat the prompt and add injected
   context (``<environment_context>``, AGENTS.md). In the bare layout ``user``
   items are the prompts, except injected ``<environment_context>`` /
   ``<user_instructions>``. ``reasoning`` → role ``reasoning`` when it has
   readable text (encrypted-only reasoning is skipped). ``agent_message`` /
   ``agent_reasoning`` events repeat items and are skipped; so is
   ``compacted`` (its ``replacement_history`` re-lists earlier items).
5. Turns: ``task_started`` or a ``turn_context`` with a new ``turn_id`` opens
   a ``turn_start``; when a session has no such marker (0.40, 0.128, bare),
   each prompt opens one (source ``user``). ``task_complete`` and
   ``turn_aborted`` emit nothing: there is no turn-end event, and a user
   interrupt is not an agent error.
6. Usage: ``token_count.info.total_token_usage`` (rollout) and
   ``turn.completed.usage`` (exec; Codex fills it from the same running
   total) are cumulative. Each new total minus the last one seen is one
   ``usage`` event; a repeated total is dropped; when any count goes down the
   counters restarted (a resumed session), so the new total is the delta.
   Input counts include cached tokens, output counts include reasoning, as
   OpenAI reports them; ``cached_input_tokens`` → ``cache_read_tokens``,
   ``cache_write_input_tokens`` → ``cache_write_tokens``,
   ``reasoning_output_tokens`` → ``reasoning_tokens``. ``token_usage_record``
   (0.169) repeats the same usage and is not read.
7. Errors: ``event_msg`` ``error`` and exec ``error`` → ``error``;
   ``turn.failed`` → ``error`` with code ``turn_failed``. Exec ``error``
   *items* are notices (config and hook-trust warnings, deprecations, model
   reroutes) → ``message`` role ``warning``, so error-count graders do not
   count them.
8. Exec items: ``item.started`` of a tool item emits its ``tool_call`` (so a
   cut-off run keeps it unanswered), ``item.completed`` its ``tool_result``
   (and the call first if it never started). Names: ``command_execution``
   (``args.command``, result ``aggregated_output``), ``file_change`` (result:
   its status), ``web_search``, ``mcp__<server>__<tool>`` (the rollout's
   spelling), and a subagent tool's own name; errors from
   ``status`` ``failed``/``declined`` and a non-zero ``exit_code``; the call
   id is the item id. ``agent_message`` → ``message``, ``reasoning`` → role
   ``reasoning``; ``todo_list`` is skipped.
9. Timestamps: the envelope's ``timestamp``; bare items and exec lines have
   none.

A line that is not JSON, not an object, or a call/result/usage with wrong
field types is an input error (file, line, field, and the current session as
its trace, which it taints); unknown types are skipped, since Codex adds them
often (a ``type`` that is not a string is an error, not an unknown type). State is bounded: the session id, the last totals, the current turn id,
and the exec tool items started but not completed (at most 4096).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from trajgrade.events import AgentError, Event, Message, TraceStart, TurnStart
from trajgrade.formats._codex_exec import EXEC_TYPES, ExecItems
from trajgrade.formats._codex_items import (
    CALL_TYPES,
    ITEM_TYPES,
    OUTPUT_TYPES,
    BadRecord,
    content_text,
    reasoning_message,
    tool_call,
    tool_result,
)
from trajgrade.formats._codex_usage import UsageDeltas
from trajgrade.formats._fields import BadField, opt_str
from trajgrade.formats._lines import RecordReader
from trajgrade.formats.vally import parse_timestamp

if TYPE_CHECKING:
    from trajgrade.errors import InputError

__all__ = ("FORMAT", "FORMATS", "CodexReader")

_ENVELOPES: Final = frozenset(
    {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
)
#: ``error`` is also a canonical event tag: never claim a file by it.
_EXEC_SNIFF: Final = EXEC_TYPES - {"error"}
_META_KEYS: Final = ("cwd", "originator", "cli_version", "source", "model_provider")
_SPOKEN: Final = frozenset({"assistant", "developer", "system"})
#: The ``event_msg`` payload types that give events.
_READ_EVENTS: Final = frozenset(
    {"token_count", "user_message", "item_completed", "task_started", "error"}
)
_INJECTED: Final = ("<environment_context>", "<user_instructions>")


def _meta(session: dict[str, Any]) -> dict[str, Any]:
    """The session facts worth keeping (the instructions are kilobytes)."""
    return {k: session[k] for k in (*_META_KEYS, "git") if k in session}


class CodexReader(RecordReader):
    """Translates Codex rollout / ``exec --json`` lines to canonical events."""

    format = "codex"
    expected = "one Codex rollout or `codex exec --json` record"

    def __init__(self, *, source: str, default_trace: str) -> None:
        super().__init__(source=source, default_trace=default_trace)
        self._tid = default_trace
        self._usage = UsageDeltas()
        self._items = ExecItems()
        #: Current turn id, and whether this session marks turns at all.
        self._turn: str | None = None
        self._marked = False
        #: The record kind this session's prompts arrive in.
        self._prompts: str | None = None
        #: Last timestamp text and its value: consecutive lines often share it.
        self._ts_text: object = None
        self._ts: float | None = None
        #: The model of the current turn (``turn_context``), for usage events.
        self._model: str | None = None
        #: False: no grader reads ``ToolResult.result`` (trajgrade.events).
        self._payload = True

    def skip_tool_results(self) -> None:
        """No grader reads ``ToolResult.result``: leave it None (the status,
        error flag and duration are still read)."""
        self._payload = False

    def record(
        self, record: Any, n: int, events: list[Event], errors: list[InputError]
    ) -> None:
        try:
            if not isinstance(record, dict):
                msg = f"expected a JSON object, got {type(record).__name__}"
                raise BadRecord(msg)
            self._record(record, events)
        except BadField as exc:
            msg = f"{exc.message}; fix the producer or the line"
            errors.append(self.error(msg, n, field=exc.field, trace=self._tid))

    def undecodable(self, line: bytes, n: int, exc: Exception) -> InputError:
        msg = f"not valid JSON ({exc}); each line must be {self.expected}"
        return self.error(msg, n, trace=self._tid)

    def current_trace(self) -> str | None:
        return self._tid

    def _record(self, record: dict[str, Any], events: list[Event]) -> None:
        kind = record.get("type")
        if kind is not None and not isinstance(kind, str):
            msg = f"`type` must be a string, got {type(kind).__name__}"
            raise BadRecord(msg, "type")
        text = record.get("timestamp")
        if text != self._ts_text:  # (consecutive lines often share it)
            self._ts_text, self._ts = text, parse_timestamp(text)
        ts = self._ts
        if kind in _ENVELOPES:
            payload = record.get("payload")
            if not isinstance(payload, dict):
                msg = f"a {kind} record needs a `payload` object"
                raise BadRecord(msg, "payload")
            try:
                self._envelope(kind, payload, ts, events)
            except BadField as exc:
                exc.field = f"payload.{exc.field}" if exc.field else "payload"
                raise
        elif kind in EXEC_TYPES:
            self._exec(kind, record, events)
        elif kind in ITEM_TYPES:
            self._item(record, ts, events, bare=True)
        elif kind is None and "record_type" not in record:
            tid = record.get("id")
            if not isinstance(tid, str) or not tid:
                msg = "a record needs a `type` (or, as a bare rollout header, a string `id`)"
                raise BadRecord(msg, "type")
            self._session(tid, ts, _meta(record), events)

    def _session(
        self, tid: str, ts: float | None, meta: dict[str, Any], events: list[Event]
    ) -> None:
        if tid == self._tid:
            return
        self._tid = tid
        self._usage.reset()
        self._model = None
        self._items.reset()
        self._turn = self._prompts = None
        self._marked = False
        events.append(TraceStart(trace_id=tid, ts=ts, metadata=meta or None))

    def _envelope(
        self, kind: str, p: dict[str, Any], ts: float | None, events: list[Event]
    ) -> None:
        if kind == "response_item":
            self._item(p, ts, events, bare=False)
        elif kind == "event_msg":
            self._event(p, ts, events)
        elif kind == "turn_context":
            model = p.get("model")
            self._model = model if isinstance(model, str) and model else self._model
            turn = p.get("turn_id")
            if isinstance(turn, str):
                self._turn_marker(turn, ts, events)
        elif kind == "session_meta":
            tid = p.get("id")
            if not isinstance(tid, str) or not tid:
                msg = "session_meta needs a string `id`"
                raise BadRecord(msg, "id")
            self._session(tid, ts, _meta(p), events)

    def _item(
        self, item: dict[str, Any], ts: float | None, events: list[Event], *, bare: bool
    ) -> None:
        kind = item.get("type")
        if not isinstance(kind, str):
            msg = f"an item needs a string `type`, got {type(kind).__name__}"
            raise BadRecord(msg, "type")
        tid = self._tid
        if kind in CALL_TYPES:
            events.append(tool_call(item, tid, ts))
        elif kind in OUTPUT_TYPES:
            events.append(tool_result(item, tid, ts, payload=self._payload))
        elif kind == "message":
            role = item.get("role")
            if isinstance(role, str) and role in _SPOKEN:
                text = content_text(item.get("content"))
                events.append(Message(trace_id=tid, ts=ts, role=role, text=text))
            elif role == "user" and bare:
                text = content_text(item.get("content"))
                if not text.lstrip().startswith(_INJECTED):
                    self._prompt("message", text, ts, events)
        elif kind == "reasoning":
            message = reasoning_message(item, tid, ts)
            if message.text:
                events.append(message)

    def _event(self, p: dict[str, Any], ts: float | None, events: list[Event]) -> None:
        kind = opt_str(p, "type")  # another type of value is not a type name
        if kind not in _READ_EVENTS:
            return  # (most: agent_reasoning, agent_message, … repeat items)
        if kind == "token_count":
            info = p.get("info")
            if isinstance(info, dict):
                where = "info.total_token_usage"
                usage = self._usage.usage(
                    info.get("total_token_usage"), where, self._tid, ts, self._model
                )
                if usage is not None:
                    events.append(usage)
        elif kind == "user_message":
            # ≤ 0.40 also announced injected context with kind != "plain".
            text = p.get("message")
            if p.get("kind", "plain") == "plain":
                self._prompt(kind, text if isinstance(text, str) else "", ts, events)
        elif kind == "item_completed":
            item = p.get("item")
            if isinstance(item, dict) and item.get("type") == "UserMessage":
                self._prompt(kind, content_text(item.get("content")), ts, events)
        elif kind == "task_started":
            turn = p.get("turn_id")
            self._turn_marker(turn if isinstance(turn, str) else None, ts, events)
        elif kind == "error":
            text = p.get("message")
            message = text if isinstance(text, str) else ""
            events.append(AgentError(trace_id=self._tid, ts=ts, message=message))

    def _turn_marker(
        self, turn: str | None, ts: float | None, events: list[Event]
    ) -> None:
        self._marked = True
        if turn is None or turn != self._turn:
            self._turn = turn
            events.append(TurnStart(trace_id=self._tid, ts=ts))

    def _prompt(
        self, source: str, text: str, ts: float | None, events: list[Event]
    ) -> None:
        if self._prompts is None:
            self._prompts = source
        elif self._prompts != source:
            return  # a second record kind repeating the same prompt
        if not self._marked:
            events.append(TurnStart(trace_id=self._tid, ts=ts, source="user"))
        events.append(Message(trace_id=self._tid, ts=ts, role="user", text=text))

    def _exec(self, kind: str, record: dict[str, Any], events: list[Event]) -> None:
        tid = self._tid
        if kind == "thread.started":
            thread = record.get("thread_id")
            if not isinstance(thread, str) or not thread:
                msg = "thread.started needs a string `thread_id`"
                raise BadRecord(msg, "thread_id")
            self._session(thread, None, {}, events)
        elif kind == "turn.started":
            events.append(TurnStart(trace_id=tid))
        elif kind == "turn.completed":
            usage = self._usage.usage(record.get("usage"), "usage", tid, None)
            if usage is not None:
                events.append(usage)
        elif kind == "turn.failed":
            error = record.get("error")
            text = error.get("message") if isinstance(error, dict) else None
            message = text if isinstance(text, str) else "turn failed"
            events.append(AgentError(trace_id=tid, message=message, code="turn_failed"))
        elif kind == "error":
            text = record.get("message")
            message = text if isinstance(text, str) else ""
            events.append(AgentError(trace_id=tid, message=message))
        elif kind != "item.updated":
            events.extend(self._items.events(kind, record.get("item"), tid))


class _CodexFormat:
    name = "codex"
    summary = "OpenAI Codex CLI session rollouts (~/.codex/sessions/**/rollout-*.jsonl, all layouts) and `codex exec --json` output"

    def sniff(self, record: object) -> bool:
        if not isinstance(record, dict):
            return False
        kind = record.get("type")
        if isinstance(kind, str):
            if kind in _ENVELOPES:
                return isinstance(record.get("payload"), dict)
            return kind in _EXEC_SNIFF
        # A bare-layout header: no type, a session id and a start time.
        return (
            kind is None
            and isinstance(record.get("id"), str)
            and isinstance(record.get("timestamp"), str)
            and ("instructions" in record or "git" in record)
        )

    def reader(self, *, source: str, default_trace: str) -> CodexReader:
        return CodexReader(source=source, default_trace=default_trace)


FORMAT: Final = _CodexFormat()

#: What this module contributes to the registry.
FORMATS: Final = (FORMAT,)
