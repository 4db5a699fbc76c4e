"""Token usage read from the session transcript, a little more on every call.

Hook payloads carry no token counts, but each names the session transcript
(``transcript_path``: Claude Code's session JSONL, Codex's rollout, Gemini's
chat JSONL). Every invocation reads the complete lines appended since the
offset kept in the session state and turns the usage they report into
``usage`` events; nothing else is taken from the transcript (calls come from
the hooks themselves, so nothing is counted twice).

Counting once, across restarts at any offset:

* Claude Code and Gemini write a response several times under one message
  id, with counts that only grow. The state keeps, per recent message id,
  the counts already emitted; a line adds only what exceeds them. A response
  split across two invocations is therefore neither missed nor counted twice,
  and a budget trips on the first line that crosses it. (The transcript
  adapters emit each response once with its last line's numbers: the same
  sums.)
* A Claude Code subagent's responses are read from the ``agent_progress``
  lines that echo them into the session's transcript (its own file is not
  named by the hooks), and its final response, which is not echoed, from
  the ``Task`` result's ``toolUseResult.usage``; message ids keep them from
  being counted twice.
* Codex writes running session totals (``token_count``); the state keeps the
  last totals and a new total adds its difference (a total that went down
  means the counters restarted: all of it is new), as the rollout adapter does.

Only whole lines are read (up to the last newline), so a line being written
is read next time. Lines that do not parse are skipped: the transcript is
the agent's file, and grading must not stop on it. The field mappings are
the adapters' (``formats/claude_code.py``, ``codex.py``, ``gemini_jsonl.py``);
they are repeated here in a few lines because importing ``trajgrade.formats``
loads every adapter, which the cold hook path cannot afford.
"""

from __future__ import annotations

import os
from typing import Any, Final

import msgspec

from trajgrade._util.depth import decode_bounded
from trajgrade.events import Usage

__all__ = ("Cursor", "read_usage")

#: Message ids whose counts are remembered (a response's lines are adjacent).
SEEN_MAX: Final = 256
#: At most this many new bytes are read per invocation (a huge backlog is
#: read over several calls instead of stalling one).
READ_MAX: Final = 8 * 1024 * 1024

_ANY: Final = msgspec.json.Decoder()
#: Cheap pre-filters: lines without these bytes carry no usage (Codex names
#: its model in ``turn_context`` lines, apart from its token counts).
_MARKS: Final = {
    "claude-code": (b'"usage"',),
    "codex": (b'"token_count"', b'"turn_context"'),
    "gemini": (b'"tokens"',),
}


class Cursor(msgspec.Struct, kw_only=True):
    """Where reading a transcript stopped, and what was counted."""

    path: str | None = None
    offset: int = 0
    #: Device and inode of the file read, to notice a replaced file.
    ident: tuple[int, int] | None = None
    #: Per message id: (input, output, cache read, cache write, reasoning) emitted.
    seen: dict[str, list[int]] = msgspec.field(default_factory=dict)
    #: Codex: the last running totals.
    totals: list[int] | None = None
    #: Codex: the model of the current turn (``turn_context``).
    model: str | None = None
    #: Claude Code: the model of each recent subagent (``agentId``).
    agents: dict[str, str] = msgspec.field(default_factory=dict)


def read_usage(agent: str, path: str | None, cursor: Cursor) -> list[Usage]:
    """The usage events in the lines appended to ``path`` since ``cursor``
    (which is advanced). A missing file gives nothing."""
    if not path:
        return []
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return []
    try:
        st = os.fstat(fd)
        ident = (st.st_dev, st.st_ino)
        if cursor.path != path or cursor.ident != ident or st.st_size < cursor.offset:
            # Another file, or this one was rewritten: start it afresh, but
            # keep the counts already emitted (the same responses reappear).
            cursor.path, cursor.ident, cursor.offset = path, ident, 0
        if st.st_size == cursor.offset:
            return []
        os.lseek(fd, cursor.offset, os.SEEK_SET)
        data = os.read(fd, min(st.st_size - cursor.offset, READ_MAX))
    finally:
        os.close(fd)
    end = data.rfind(b"\n")
    if end < 0:
        return []
    cursor.offset += end + 1
    marks = _MARKS[agent]
    out: list[Usage] = []
    for line in data[:end].split(b"\n"):
        if not any(mark in line for mark in marks):
            continue
        try:
            rec = decode_bounded(_ANY, line)
        except msgspec.DecodeError:
            continue
        if not isinstance(rec, dict):
            continue
        if agent == "codex":
            usage = _codex(rec, cursor)
        else:
            usage = _by_message(agent, rec, cursor)
        if usage is not None:
            out.append(usage)
    return out


def _int(d: Any, key: str) -> int:
    v = d.get(key) if isinstance(d, dict) else None
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0


def _anthropic(u: dict[str, Any]) -> list[int]:
    read = _int(u, "cache_read_input_tokens")
    write = _int(u, "cache_creation_input_tokens")
    return [
        _int(u, "input_tokens") + read + write,
        _int(u, "output_tokens"),
        read,
        write,
        0,
    ]


def _by_message(agent: str, rec: dict[str, Any], cursor: Cursor) -> Usage | None:
    if agent == "claude-code":
        kind = rec.get("type")
        if kind == "progress":
            rec = _subagent_message(rec, cursor)
        elif kind == "user":
            rec = _subagent_result(rec, cursor)
        msg = rec.get("message")
        if rec.get("type") != "assistant" or not isinstance(msg, dict):
            return None
        model = _text(msg.get("model"))
        mid, u = msg.get("id"), msg.get("usage")
        if not isinstance(u, dict):
            return None
        counts = _anthropic(u)
    else:
        mid, t = rec.get("id"), rec.get("tokens")
        if rec.get("type") != "gemini" or not isinstance(t, dict):
            return None
        model = _text(rec.get("model"))
        thoughts = _int(t, "thoughts")
        counts = [
            _int(t, "input") + _int(t, "tool"),
            _int(t, "output") + thoughts,
            _int(t, "cached"),
            0,
            thoughts,
        ]
    if isinstance(mid, str) and mid:
        before = cursor.seen.pop(mid, [0, 0, 0, 0, 0])
        cursor.seen[mid] = [max(a, b) for a, b in zip(before, counts, strict=True)]
        if len(cursor.seen) > SEEN_MAX:
            del cursor.seen[next(iter(cursor.seen))]
        counts = [max(0, c - b) for c, b in zip(counts, before, strict=True)]
    return _usage(counts, model)


def _subagent_message(rec: dict[str, Any], cursor: Cursor) -> dict[str, Any]:
    """The subagent response an ``agent_progress`` line echoes (Claude Code
    2.1 writes a subagent's transcript to a file of its own, which hooks do
    not name; its responses reach the session's file only as these echoes).
    Its message id keeps it from being counted twice."""
    data = rec.get("data")
    if not isinstance(data, dict) or data.get("type") != "agent_progress":
        return {}
    msg, agent = data.get("message"), data.get("agentId")
    if not isinstance(msg, dict):
        return {}
    inner = msg.get("message")
    model = _text(inner.get("model")) if isinstance(inner, dict) else None
    if isinstance(agent, str) and model is not None:
        # (for the final response, which only the Task result reports)
        cursor.agents.pop(agent, None)
        cursor.agents[agent] = model
        if len(cursor.agents) > SEEN_MAX:
            del cursor.agents[next(iter(cursor.agents))]
    return msg


def _subagent_result(rec: dict[str, Any], cursor: Cursor) -> dict[str, Any]:
    """A subagent's final response, which is not echoed: the ``Task``
    result's ``toolUseResult.usage``, as a response of the subagent's model."""
    done = rec.get("toolUseResult")
    if not isinstance(done, dict):
        return {}
    agent, u = done.get("agentId"), done.get("usage")
    if not isinstance(agent, str) or not isinstance(u, dict):
        return {}
    return {
        "type": "assistant",
        "message": {
            "id": f"task-result:{agent}",
            "model": cursor.agents.get(agent),
            "usage": u,
        },
    }


_CODEX_KEYS: Final = (
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "cache_write_input_tokens",
    "reasoning_output_tokens",
)


def _codex(rec: dict[str, Any], cursor: Cursor) -> Usage | None:
    payload = rec.get("payload")
    if rec.get("type") == "turn_context" and isinstance(payload, dict):
        cursor.model = _text(payload.get("model")) or cursor.model
        return None
    if not isinstance(payload, dict) or payload.get("type") != "token_count":
        return None
    info = payload.get("info")
    total = info.get("total_token_usage") if isinstance(info, dict) else None
    if not isinstance(total, dict):
        return None
    totals = [_int(total, k) for k in _CODEX_KEYS]
    last = cursor.totals
    if totals == last:
        return None
    cursor.totals = totals
    if last is not None and all(t >= s for t, s in zip(totals, last, strict=True)):
        totals = [t - s for t, s in zip(totals, last, strict=True)]
    return _usage(totals, cursor.model)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _usage(counts: list[int], model: str | None) -> Usage | None:
    if not any(counts):
        return None
    inp, out, read, write, reasoning = counts
    return Usage(
        input_tokens=inp,
        output_tokens=out,
        cache_read_tokens=read,
        cache_write_tokens=write,
        reasoning_tokens=reasoning,
        model=model,
    )
