"""Claude Code line shapes, decoded in one typed pass, and small helpers.

The Structs declare only the fields the reader uses; msgspec skips the rest
while parsing, which matters here: ``progress`` lines carry whole copies of a
subagent's messages and tool-result lines repeat file contents in
``toolUseResult``, none of which is ever turned into Python objects.
Transcripts spell the envelope in camelCase (``sessionId``), stream-json in
snake_case (``session_id``); both spellings are declared.
"""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec

from trajgrade._util.depth import decode_bounded
from trajgrade.events import AgentError, Event, TraceEnd, Usage
from trajgrade.formats._fields import field_of

__all__ = (
    "DECODER",
    "KIND_DECODER",
    "Block",
    "Kind",
    "Record",
    "TokenCounts",
    "call_args",
    "call_directory",
    "counts",
    "field_of",
    "human_prompt",
    "init_metadata",
    "result_events",
    "session_in",
    "usage_event",
)


class TokenCounts(msgspec.Struct, frozen=True, gc=False):
    """Anthropic ``usage``: ``input_tokens`` excludes the cached parts."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None


class Block(msgspec.Struct, frozen=True, gc=False):
    """One content block; one Struct for every block type (unknown types pass)."""

    type: str = ""
    text: str | None = None
    thinking: str | None = None
    id: str | None = None
    name: str | None = None
    input: Any = None
    tool_use_id: str | None = None
    content: Any = None
    is_error: bool | None = None


class _Message(msgspec.Struct, frozen=True, gc=False):
    id: str | None = None
    content: str | list[Block] | None = None
    usage: TokenCounts | None = None
    model: str | None = None


class Record(msgspec.Struct, frozen=True, gc=False):
    """One line of a transcript or of stream-json output."""

    type: str = ""
    subtype: str | None = None
    session: str | None = msgspec.field(name="sessionId", default=None)
    stream_session: str | None = msgspec.field(name="session_id", default=None)
    timestamp: str | float | None = None
    message: _Message | None = None
    sidechain: bool | None = msgspec.field(name="isSidechain", default=None)
    agent_id: str | None = msgspec.field(name="agentId", default=None)
    parent_tool_use_id: str | None = None
    meta: bool | None = msgspec.field(name="isMeta", default=None)
    compact_summary: bool | None = msgspec.field(name="isCompactSummary", default=None)
    api_error: bool | None = msgspec.field(name="isApiErrorMessage", default=None)
    error: Any = None
    # stream-json `result`
    is_error: bool | None = None
    result: Any = None
    errors: Any = None
    usage: TokenCounts | None = None
    total_cost_usd: float | None = None
    # stream-json `system` `init`
    model: str | None = None
    cwd: str | None = None
    claude_code_version: str | None = None


class Kind(msgspec.Struct, frozen=True, gc=False):
    """Just the line type, to tell whether a line that failed validation mattered."""

    type: str = ""


DECODER: Final = msgspec.json.Decoder(Record)
KIND_DECODER: Final = msgspec.json.Decoder(Kind)
_ANY: Final = msgspec.json.Decoder()

_SESSION: Final = re.compile(rb'"(?:sessionId|session_id)"\s*:\s*"([^"\\]{1,200})"')

#: User-line texts that Claude Code injects; none is a human prompt.
_INJECTED: Final = (
    "[Request interrupted by user",  # both interruption markers
    "<command-name>",  # slash commands (before 2.1.38; later `system` lines)
    "<command-message>",
    "<command-args>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<local-command-caveat>",
    "<task-notification>",  # a background task finished
    "<bash-input>",  # `!` shell mode: the user ran a command, not a prompt
    "<bash-stdout>",
    "<bash-stderr>",
)


def session_in(raw: bytes) -> str | None:
    """The session id a broken line names (its first 4 KiB), if any."""
    m = _SESSION.search(raw[:4096])
    return m.group(1).decode("utf-8", "replace") if m else None


def human_prompt(rec: Record) -> str | None:
    """The text of a ``user`` line that a person typed, else None.

    Not prompts: tool-result carriers, meta and compaction-summary messages,
    a subagent's task (sidechain / stream-json ``parent_tool_use_id``), and
    the injected markers above.
    """
    if rec.meta or rec.compact_summary or rec.sidechain or rec.parent_tool_use_id:
        return None
    content = rec.message.content if rec.message is not None else None
    if isinstance(content, str):
        text = content
    elif content:
        if any(b.type == "tool_result" for b in content):
            return None
        text = "\n".join(b.text for b in content if b.type == "text" and b.text)
    else:
        return None
    head = text.lstrip()
    if not head or head.startswith(_INJECTED):
        return None
    return text


def call_args(raw: Any) -> tuple[dict[str, Any] | None, str | None]:
    """``input`` as (args, args_raw): an object as it is; a string kept verbatim
    and parsed once (args only when it is a JSON object)."""
    if isinstance(raw, dict):
        return raw, None
    if isinstance(raw, str):
        try:
            parsed = decode_bounded(_ANY, raw)
        except (msgspec.DecodeError, UnicodeDecodeError):
            return None, raw
        return (parsed if isinstance(parsed, dict) else None), raw
    return None, None


def usage_event(
    u: TokenCounts,
    tid: str,
    ts: float | None,
    cost: float | None = None,
    model: str | None = None,
) -> Usage:
    """Anthropic usage as canonical usage: ``input_tokens`` counts every prompt
    token, cached ones included (the OpenAI convention the other formats use),
    and the cache reads/writes are also given on their own."""
    read = u.cache_read_input_tokens or 0
    write = u.cache_creation_input_tokens or 0
    return Usage(
        trace_id=tid,
        ts=ts,
        input_tokens=(u.input_tokens or 0) + read + write,
        output_tokens=u.output_tokens or 0,
        cache_read_tokens=read,
        cache_write_tokens=write,
        cost_usd=cost,
        model=model,
    )


def counts(u: Usage) -> tuple[int, int, int, int]:
    """The token fields of a usage event, in a fixed order."""
    return (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens)


def call_directory(rec: Record) -> str | None:
    """The directory a line's tool calls ran in: transcripts record ``cwd``
    on every line (the session's project, or where ``cd`` left the shell).
    Only an absolute one anchors paths; anything else is not a directory."""
    cwd = rec.cwd
    return cwd if isinstance(cwd, str) and cwd.startswith("/") else None


def init_metadata(rec: Record) -> dict[str, Any] | None:
    """What a stream-json ``init`` tells about the run."""
    meta = {
        "model": rec.model,
        "cwd": rec.cwd,
        "claude_code_version": rec.claude_code_version,
    }
    return {k: v for k, v in meta.items() if v is not None} or None


def result_events(
    rec: Record,
    tid: str,
    ts: float | None,
    counted: list[int],
    model: str | None = None,
) -> list[Event]:
    """A stream-json ``result``: the tokens its session totals hold beyond
    ``counted`` (never negative), of ``model``; the run's total cost when
    nothing was ``counted`` before (it is the session's total, not the cost
    of these tokens); an error if it failed; and the end of the trace."""
    out: list[Event] = []
    more = [0, 0, 0, 0]
    if rec.usage is not None:
        total = counts(usage_event(rec.usage, tid, ts))
        more = [max(0, t - c) for t, c in zip(total, counted, strict=True)]
    cost = None if any(counted) else rec.total_cost_usd
    if any(more) or cost is not None:
        out.append(
            Usage(
                trace_id=tid,
                ts=ts,
                input_tokens=more[0],
                output_tokens=more[1],
                cache_read_tokens=more[2],
                cache_write_tokens=more[3],
                cost_usd=cost,
                model=model,
            )
        )
    failed = rec.is_error is True or rec.subtype not in (None, "success")
    if failed:
        out.append(
            AgentError(trace_id=tid, ts=ts, message=_failure(rec), code=rec.subtype)
        )
    out.append(TraceEnd(trace_id=tid, ts=ts, result=rec.result, is_error=failed))
    return out


def _failure(rec: Record) -> str:
    """What a failed run says about its failure."""
    if isinstance(rec.result, str) and rec.result:
        return rec.result
    if isinstance(rec.errors, list) and rec.errors:
        return "; ".join(map(str, rec.errors))
    return f"the run ended with {rec.subtype or 'is_error'}"
