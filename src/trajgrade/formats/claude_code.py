"""Claude Code session transcripts and ``claude -p --output-format stream-json``.

Transcripts are ``~/.claude/projects/<dir>/<sessionId>.jsonl`` (read from
2.0.14 to 2.1.197), subagent transcripts
``<sessionId>/subagents/agent-<agentId>.jsonl``; stream-json is what
``claude -p … --output-format stream-json --verbose`` prints. Both are one
JSON record per line, told apart by nothing the reader needs: the same code
reads both (transcripts spell the session ``sessionId``, stream-json
``session_id``).

Mapping (line ``type``):

* ``assistant`` (one content block per line): ``text`` → ``message`` role
  ``assistant``; ``thinking`` → ``message`` role ``reasoning``; ``tool_use``
  → ``tool_call`` (``id``, ``name`` as written, MCP names included; an object
  ``input`` is ``args``, a string one is kept in ``args_raw`` and parsed once;
  the line's ``cwd``, when absolute, is the call's: its relative paths are
  the project's).
  An API-error line (``isApiErrorMessage``) → ``error`` (code: its ``error``).
* ``user``: each ``tool_result`` block → ``tool_result`` paired by
  ``tool_use_id`` (``content`` as written, string or blocks; ``is_error``,
  absent = false). A human prompt → ``turn_start`` (source ``user``) and
  ``message`` role ``user``.
* stream-json ``system`` ``init`` → ``trace_start`` (``model``, ``cwd``,
  ``claude_code_version``) and ``turn_start``: ``-p`` does not echo its prompt.
* stream-json ``result`` → ``usage`` (what it counts beyond the responses
  already counted, and ``total_cost_usd``), ``error`` when it failed, and
  ``trace_end`` (``result``; ``is_error`` from ``is_error`` or a ``subtype``
  other than ``success``).
* Skipped: ``progress`` (hook, bash and task-wait progress; ``agent_progress``
  echoes), ``summary`` (titles of earlier sessions), ``file-history-snapshot``,
  ``queue-operation``, ``attachment``, ``last-prompt``, ``stream_event``
  (partial messages that arrive again whole), other ``system`` subtypes
  (hooks, ``local_command``, ``compact_boundary``), ``redacted_thinking`` and
  image blocks, and line types added by later versions.

Decisions:

1. Trace id = ``sessionId`` / ``session_id``; lines without one belong to
   the source's default trace. Several sessions in one stream are several
   traces. A subagent file has its parent's session id, so graded with its
   parent it joins the parent's trace.
2. Turns: a ``user`` line is a human prompt unless it carries
   ``tool_result`` blocks, is ``isMeta`` or ``isCompactSummary``, is a
   subagent's task (``isSidechain`` / stream-json ``parent_tool_use_id``),
   or is an injected marker (interruptions, slash-command and ``!``-shell
   echoes, background-task notifications). The prompt an ``init`` stands for
   is not counted twice when stream-json echoes it (``--replay-user-messages``).
   ``turn_duration`` / ``stop_hook_summary`` only complete token usage.
3. Usage is counted once per response: every line of a response repeats
   ``message.usage`` under one ``message.id``, and later lines may carry a
   larger ``output_tokens``. A response's usage is held until it is known to
   be complete — the next response of the same (sub)agent starts, a human
   prompt, ``turn_duration``, ``stop_hook_summary``, ``result`` or end of
   input — and then emitted once with its last line's numbers, so a token
   budget trips at most one response late. ``input_tokens`` counts cached
   prompt tokens too (``cache_read_tokens``/``cache_write_tokens`` give them
   apart), as in the other formats.
4. Subagents: ``progress`` ``agent_progress`` lines echo a subagent's
   messages (tool calls included) and are skipped; the subagent's own file is
   the record of its work. Its calls carry ``agent`` = its ``agentId``
   (stream-json: the ``Task`` call's ``parent_tool_use_id``); the parent's own
   calls have no ``agent``.
5. Transcripts have no end record: no ``trace_end`` is invented; end of input
   (or the runner) closes the trace. Calls left without a result stay
   unanswered for the engine to report; no result is invented.
6. stream-json assistant lines carry the usage of the response's start
   (``output_tokens`` 1); the run's ``result`` has session totals, so it adds
   the difference per field (never negative), priced by the last
   response's model. Its ``total_cost_usd`` is the session's total, not the
   cost of those tokens, so it is the usage event's ``cost_usd`` only when no
   earlier line reported usage (else a dollar budget would count the session
   twice). A run cut off before ``result`` undercounts output tokens.
7. Timestamps are ``timestamp`` (stream-json has them on ``user`` lines only).
   ``duration_ms`` is left empty: most tools record none.
8. A line that is not JSON, or whose fields have the wrong type, is an input
   error at its line and field; it taints the session it names, else the one
   the previous line belonged to (one file is one session), and reading goes
   on. A ``tool_use`` without ``id``/``name`` or a ``tool_result`` without
   ``tool_use_id`` is reported the same way and skipped. A wrong type on a
   line type that is skipped anyway is not an error.

State is bounded: per live session the held usage of its open responses and
four token sums (at most 1024 sessions, least recently used evicted after
flushing), and the ids of the last 4096 completed responses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import msgspec

from trajgrade.errors import InputError, Location
from trajgrade.events import (
    AgentError,
    Event,
    Message,
    ToolCall,
    ToolResult,
    TraceStart,
    TurnStart,
    Usage,
)
from trajgrade.formats._claude_records import (
    DECODER,
    KIND_DECODER,
    Record,
    call_args,
    call_directory,
    counts,
    field_of,
    human_prompt,
    init_metadata,
    result_events,
    session_in,
    usage_event,
)
from trajgrade.formats._lines import (
    DecodedFeed,
    RecordIndex,
    decode_line,
    decode_records,
    located,
    nonblank_lines,
    reader_failed,
)
from trajgrade.formats.vally import parse_timestamp

if TYPE_CHECKING:
    from trajgrade.formats._claude_records import Block
    from trajgrade.formats._lines import Fed, Measured

__all__ = ("FORMAT", "FORMATS", "ClaudeCodeReader")

#: Line types that become events; every other type is skipped.
_READ: Final = frozenset(("user", "assistant", "system", "result"))
#: Line types that only Claude Code writes (with a session id, or the
#: ``summary``/``file-history-snapshot`` keys checked in ``sniff``).
_TYPES: Final = _READ | {
    "progress",
    "summary",
    "file-history-snapshot",
    "queue-operation",
    "attachment",
    "last-prompt",
    "stream_event",
}
_EXPECTED: Final = "one Claude Code transcript or stream-json record"
#: Sessions with state at once; a stream interleaving more is not expected,
#: and evicting one only flushes its held usage early.
_SESSIONS_MAX: Final = 1024
#: Completed response ids remembered. A response's lines are contiguous per
#: (sub)agent in every file read, so an id can recur only while a handful of
#: agents interleave; 4096 is far beyond that.
_SEEN_MAX: Final = 4096


class _Session:
    """What one session needs between lines."""

    __slots__ = ("counted", "implicit_turn", "model", "pending")

    def __init__(self) -> None:
        #: Per (sub)agent: the open response's id and its latest usage.
        self.pending: dict[str | None, tuple[str, Usage]] = {}
        #: Tokens emitted so far (input, output, cache read, cache write),
        #: the baseline of stream-json's session totals.
        self.counted = [0, 0, 0, 0]
        #: An ``init`` opened a turn that no prompt or response has claimed.
        self.implicit_turn = False
        #: The model of the latest response (prices the ``result``'s tokens).
        self.model: str | None = None


class ClaudeCodeReader(DecodedFeed):
    """Translates Claude Code transcript and stream-json lines to canonical events."""

    format = "claude-code"

    def __init__(self, *, source: str, default_trace: str) -> None:
        self._source = source
        self._default = default_trace
        self._sessions: dict[str, _Session] = {}
        self._seen: dict[str, None] = {}
        #: The trace of the last line read: where a broken line most likely belongs.
        self._last: str | None = None

    def feed_decoded(
        self,
        buf: bytes | memoryview,
        first_line: int,
        decoded: Measured,
        *,
        lines: int | None = None,
    ) -> Fed:
        events: list[Event] = []
        errors: list[InputError] = []
        # The common case in one C call (or a few, around lines the nesting
        # bound decoded already); any bad line takes the line loop below.
        # decode_lines skips blank lines, so a record's index is its place
        # among the non-blank lines: events and errors carry that, and lines
        # are counted only if an error needs its number.
        recs = decode_records(DECODER, buf, decoded, lines=lines)
        if recs is not None:
            index = RecordIndex()
            for k, rec in enumerate(recs):
                if rec.type in _READ:
                    self._guarded(rec, k, events, errors, None, buf)
                    index.extend([k] * (len(events) - len(index)))
            if errors:
                errors = located(errors, nonblank_lines(buf, first_line))
            return events, errors, index
        at: list[int] = []
        for n, line in enumerate(bytes(buf).split(b"\n"), start=first_line):
            if not line.strip():
                continue
            try:
                rec = decode_line(DECODER.decode, line)
            except msgspec.ValidationError as exc:
                self._invalid(line, n, exc, errors)
            except (msgspec.DecodeError, UnicodeDecodeError) as exc:
                msg = f"not valid JSON ({exc}); each line must be {_EXPECTED}"
                errors.append(self._error(msg, n, None, self._trace_of(line)))
            else:
                if rec.type in _READ:
                    self._guarded(rec, n, events, errors, line, buf)
            at.extend([n] * (len(events) - len(at)))
        return events, errors, at

    def _guarded(
        self,
        rec: Any,
        n: int,
        events: list[Event],
        errors: list[InputError],
        line: bytes | None,
        buf: bytes | memoryview,
    ) -> None:
        k = len(events)
        try:
            self._record(rec, n, events, errors)
        except Exception as exc:  # a reader bug costs one record, not the run
            del events[k:]
            errors.append(reader_failed(self._source, n, line, buf, exc, self._last))

    def close(self) -> tuple[list[Event], list[InputError]]:
        events: list[Event] = []
        for s in self._sessions.values():
            self._flush(s, events)
        return events, []

    def flush_trace(self, trace_id: str) -> list[Event]:
        """The usage held for ``trace_id``'s open responses, now (the trace
        is being closed); a later line of the same response adds nothing."""
        events: list[Event] = []
        s = self._sessions.get(trace_id)
        if s is not None:
            self._flush(s, events)
        return events

    # ------------------------------------------------------------ lines
    def _record(
        self, rec: Record, n: int, events: list[Event], errors: list[InputError]
    ) -> None:
        tid = rec.session or rec.stream_session or self._default
        s = self._session(tid, events)
        self._last = tid
        ts = parse_timestamp(rec.timestamp)
        kind = rec.type
        if kind == "system":
            self._system(rec, s, tid, ts, events)
        elif kind == "result":
            self._flush(s, events)
            events.extend(result_events(rec, tid, ts, s.counted, s.model))
            del self._sessions[tid]
        elif rec.message is None:
            msg = f"a `{kind}` line needs a `message` object; fix the producer or the line"
            errors.append(self._error(msg, n, "message", tid))
        elif kind == "assistant":
            self._assistant(rec, s, tid, ts, n, events, errors)
        else:
            self._user(rec, s, tid, ts, n, events, errors)

    def _assistant(
        self,
        rec: Record,
        s: _Session,
        tid: str,
        ts: float | None,
        n: int,
        events: list[Event],
        errors: list[InputError],
    ) -> None:
        msg = rec.message
        assert msg is not None
        agent = rec.agent_id or rec.parent_tool_use_id
        s.implicit_turn = False
        held = s.pending.get(agent)
        if held is not None and held[0] != msg.id:
            self._emit(s, s.pending.pop(agent)[1], held[0], events)
        content = msg.content
        if isinstance(content, str):
            events.append(Message(trace_id=tid, ts=ts, role="assistant", text=content))
        elif isinstance(content, list):
            self._blocks(rec, content, tid, ts, n, agent, events, errors)
        if msg.usage is None:
            return
        usage = usage_event(msg.usage, tid, ts, model=msg.model)
        s.model = msg.model or s.model
        if msg.id is None:
            self._emit(s, usage, None, events)  # nothing to de-duplicate on
        elif msg.id not in self._seen:
            s.pending[agent] = (msg.id, usage)  # the later line's numbers win

    def _blocks(
        self,
        rec: Record,
        content: list[Block],
        tid: str,
        ts: float | None,
        n: int,
        agent: str | None,
        events: list[Event],
        errors: list[InputError],
    ) -> None:
        """The events of an assistant line's content blocks, in order."""
        for k, b in enumerate(content):
            if b.type == "text":
                text = b.text or ""
                if rec.api_error:
                    code = rec.error if isinstance(rec.error, str) else None
                    events.append(
                        AgentError(trace_id=tid, ts=ts, message=text, code=code)
                    )
                else:
                    events.append(
                        Message(trace_id=tid, ts=ts, role="assistant", text=text)
                    )
            elif b.type == "thinking":
                text = b.thinking or ""
                events.append(Message(trace_id=tid, ts=ts, role="reasoning", text=text))
            elif b.type == "tool_use":
                if not b.id or not b.name:
                    what = "id" if not b.id else "name"
                    err = f"a tool_use block needs a string `{what}`; fix the producer or the line"
                    field = f"message.content[{k}].{what}"
                    errors.append(self._error(err, n, field, tid))
                    continue
                args, raw = call_args(b.input)
                events.append(
                    ToolCall(
                        trace_id=tid,
                        ts=ts,
                        name=b.name,
                        call_id=b.id,
                        args=args,
                        args_raw=raw,
                        agent=agent,
                        cwd=call_directory(rec),
                    )
                )

    def _user(
        self,
        rec: Record,
        s: _Session,
        tid: str,
        ts: float | None,
        n: int,
        events: list[Event],
        errors: list[InputError],
    ) -> None:
        prompt = human_prompt(rec)
        if prompt is not None:
            self._flush(s, events)
            if s.implicit_turn:
                s.implicit_turn = False
            else:
                events.append(TurnStart(trace_id=tid, ts=ts, source="user"))
            events.append(Message(trace_id=tid, ts=ts, role="user", text=prompt))
            return
        assert rec.message is not None
        content = rec.message.content
        for k, b in enumerate(content if isinstance(content, list) else ()):
            if b.type != "tool_result":
                continue
            if not b.tool_use_id:
                err = "a tool_result block needs a string `tool_use_id`; fix the producer or the line"
                field = f"message.content[{k}].tool_use_id"
                errors.append(self._error(err, n, field, tid))
                continue
            events.append(
                ToolResult(
                    trace_id=tid,
                    ts=ts,
                    call_id=b.tool_use_id,
                    result=b.content,
                    is_error=b.is_error is True,
                )
            )

    def _system(
        self, rec: Record, s: _Session, tid: str, ts: float | None, events: list[Event]
    ) -> None:
        if rec.subtype == "init":
            meta = init_metadata(rec)
            events.append(TraceStart(trace_id=tid, ts=ts, metadata=meta))
            events.append(TurnStart(trace_id=tid, ts=ts, source="user"))
            s.implicit_turn = True
        elif rec.subtype in ("turn_duration", "stop_hook_summary"):
            self._flush(s, events)

    # ------------------------------------------------------------ state
    def _session(self, tid: str, events: list[Event]) -> _Session:
        sessions = self._sessions
        s = sessions.get(tid)
        if s is None:
            if len(sessions) >= _SESSIONS_MAX:
                self._flush(sessions.pop(next(iter(sessions))), events)
            s = sessions[tid] = _Session()
        elif tid != self._last:
            sessions[tid] = sessions.pop(tid)  # least recently used goes first
        return s

    def _flush(self, s: _Session, events: list[Event]) -> None:
        """Every response held in ``s`` is complete: emit its usage."""
        for mid, usage in s.pending.values():
            self._emit(s, usage, mid, events)
        s.pending.clear()

    def _emit(
        self, s: _Session, usage: Usage, mid: str | None, events: list[Event]
    ) -> None:
        events.append(usage)
        s.counted = [c + n for c, n in zip(s.counted, counts(usage), strict=True)]
        if mid is not None:
            seen = self._seen
            seen[mid] = None
            if len(seen) > _SEEN_MAX:
                del seen[next(iter(seen))]

    # ------------------------------------------------------------ errors
    def _trace_of(self, line: bytes) -> str | None:
        return session_in(line) or self._last

    def _invalid(
        self,
        line: bytes,
        n: int,
        exc: msgspec.ValidationError,
        errors: list[InputError],
    ) -> None:
        try:
            kind: str | None = KIND_DECODER.decode(line).type
        except (msgspec.DecodeError, UnicodeDecodeError):
            kind = None  # not an object, or a non-string `type`
        if kind is not None and kind not in _READ:
            return  # a field clash on a line type that is skipped anyway
        text, field = field_of(exc)
        msg = f"{text}; each line must be {_EXPECTED}"
        errors.append(self._error(msg, n, field, self._trace_of(line)))

    def _error(
        self, msg: str, n: int, field: str | None, trace: str | None
    ) -> InputError:
        where = Location(file=self._source, line=n, field=field)
        return InputError(msg, location=where, trace_id=trace)


class _ClaudeCodeFormat:
    name = "claude-code"
    summary = "Claude Code session transcripts (~/.claude/projects/<dir>/<session>.jsonl, 2.0-2.1) and `claude -p --output-format stream-json` output"

    def sniff(self, record: object) -> bool:
        if not isinstance(record, dict) or record.get("type") not in _TYPES:
            return False
        # `summary` lines name a leaf, `file-history-snapshot` a message; every
        # other line names its session.
        return any(
            k in record for k in ("sessionId", "session_id", "leafUuid", "messageId")
        )

    def reader(self, *, source: str, default_trace: str) -> ClaudeCodeReader:
        return ClaudeCodeReader(source=source, default_trace=default_trace)


FORMAT: Final = _ClaudeCodeFormat()

#: What this module contributes to the registry.
FORMATS: Final = (FORMAT,)
