"""Readers that take the lines the nesting bound decoded give what ``feed`` gives.

A line with more than 128 opening brackets (tool output full of code or
data) is decoded by the nesting bound to measure it (trajgrade._util.depth); a
reader that implements ``feed_decoded`` converts that value to its record
type instead of parsing the bytes a second time. Whatever the lines hold
(valid records, records of the wrong shape, brackets in strings, lines too
deep), the events, errors and lines must be exactly ``feed``'s, directly
and through the pipeline.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.formats._decode import feed_lines, raw

from trajgrade._util.depth import MAX_DEPTH, scan
from trajgrade.formats import BUILTIN, TakesDecoded
from trajgrade.pipeline.decoder import SourceDecoder

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CLAUDE = raw(
    FIXTURES / "claude-code" / "agentcmd_v2.0.14_trailing_unanswered_calls.jsonl"
)

#: Lines that give a reader many brackets: in strings (code), wide arrays,
#: a wrong type on a record field, and one line too deep to accept.
_CODE = "def f(x): return [x[0], {1: [2]}]\n" * 40


def _claude(k: int, kind: int) -> bytes:
    session = "11111111-2222-3333-4444-555555555555"
    content: Any
    if kind == 0:
        content = [{"type": "tool_result", "tool_use_id": f"t{k}", "content": _CODE}]
    elif kind == 1:
        content = [{"type": "text", "text": "x"}] + [
            {"type": "text", "text": "[{"}
        ] * 70
    elif kind == 2:
        return json.dumps(
            {"type": "user", "sessionId": 5, "pad": [[1]] * 140}
        ).encode()  # wrong type: the line loop reports it
    else:
        return ("[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5)).encode()
    record = {
        "type": "user",
        "sessionId": session,
        "uuid": f"u{k}",
        "timestamp": "2025-10-01T10:00:00.000Z",
        "message": {"role": "user", "content": content},
        "toolUseResult": {"stdout": _CODE, "rows": [[i] for i in range(80)]},
    }
    return json.dumps(record).encode()


def _native(k: int, kind: int) -> bytes:
    if kind == 0:
        event = {
            "trace_id": "a",
            "type": "tool_result",
            "call_id": f"c{k}",
            "result": _CODE,
        }
    elif kind == 1:
        event = {
            "trace_id": "a",
            "type": "tool_call",
            "name": "edit",
            "args": {"rows": [[i] for i in range(140)]},
        }
    elif kind == 2:
        event = {
            "trace_id": "a",
            "type": "tool_call",
            "name": 5,
            "args": {"rows": [[1]] * 140},
        }
    else:
        return ("{" * 3 + "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5)).encode()
    return json.dumps(event).encode()


FORMATS = {
    "claude-code": (CLAUDE.splitlines(), _claude),
    "trajgrade": (
        [
            b'{"trace_id":"a","type":"turn_start"}',
            b'{"trace_id":"a","type":"tool_call","name":"view","call_id":"1"}',
            b'{"trace_id":"a","type":"usage","tokens":{"input":3,"output":1}}',
        ],
        _native,
    ),
}


def test_the_readers_that_take_decoded_lines() -> None:
    takes = {
        name
        for name, fmt in BUILTIN.items()
        if isinstance(fmt.reader(source="x", default_trace="x"), TakesDecoded)
    }
    assert takes == set(FORMATS)


def _plain(result: Any) -> tuple[list[bytes], list[Any], list[int]]:
    events, errors, lines = result
    return (
        [msgspec.json.encode(e) for e in events],
        [(e.message, e.location, e.trace_id) for e in errors],
        list(lines or []),
    )


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@settings(max_examples=60, deadline=None)
@given(
    picks=st.lists(st.tuples(st.integers(0, 50), st.integers(0, 2)), max_size=12),
    lean=st.booleans(),
)
def test_decoded_lines_read_as_feed_reads_them(
    fmt: str, picks: list[tuple[int, int]], lean: bool
) -> None:
    base, heavy = FORMATS[fmt]
    lines = list(base)
    for k, (at, kind) in enumerate(picks):
        lines.insert(min(at, len(lines)), heavy(k, kind))
    body = b"\n".join(lines) + b"\n"
    found = scan(body)
    assert not found.deep
    decoded = [(s, e, v) for _, s, e, v in found.measured]
    assert len(decoded) == len(picks)  # every heavy line is measured

    def reader() -> Any:
        r = BUILTIN[fmt].reader(source="in.jsonl", default_trace="in")
        if lean and hasattr(r, "skip_tool_results"):
            r.skip_tool_results()
        return r

    class _Decoded:
        """The same reader, fed through ``feed_decoded``."""

        def __init__(self) -> None:
            self.r = reader()

        def feed(self, buf: bytes, first: int) -> Any:
            return self.r.feed_decoded(buf, first, decoded)

    assert _plain(feed_lines(_Decoded(), body)) == _plain(feed_lines(reader(), body))


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@settings(max_examples=30, deadline=None)
@given(
    picks=st.lists(st.tuples(st.integers(0, 50), st.integers(0, 3)), max_size=10),
    cuts=st.lists(st.integers(0, 1 << 16), max_size=4),
)
def test_the_pipeline_reads_heavy_and_deep_lines_as_the_reader_alone(
    fmt: str, picks: list[tuple[int, int]], cuts: list[int]
) -> None:
    """Through the pipeline (chunked anywhere, deep lines refused), the
    events are those of the reader fed the same lines with the deep ones
    blanked, and each deep line is one located error."""
    base, heavy = FORMATS[fmt]
    lines = list(base)
    for k, (at, kind) in enumerate(picks):
        lines.insert(min(at, len(lines)), heavy(k, kind))
    body = b"\n".join(lines) + b"\n"
    dec = SourceDecoder("in.jsonl", fmt=fmt, default_trace="in")
    events, errors = [], []
    pos = 0
    for cut in [*sorted(c % (len(body) + 1) for c in cuts), len(body)]:
        batch = dec.feed(body[pos:cut])
        events += batch.events
        errors += batch.errors
        pos = max(pos, cut)
    end = dec.close()
    deep = [
        i
        for i, line in enumerate(lines)
        if line.startswith((b"[" * MAX_DEPTH, b"{{{["))
    ]
    blanked = (
        b"\n".join(b"" if i in deep else line for i, line in enumerate(lines)) + b"\n"
    )
    alone = BUILTIN[fmt].reader(source="in.jsonl", default_trace="in")
    want_events, want_errors, _ = feed_lines(alone, blanked)
    want_events += alone.close()[0]
    assert [msgspec.json.encode(e) for e in events + end.events] == [
        msgspec.json.encode(e) for e in want_events
    ]
    depth_errors = [e for e in errors if "nested deeper" in e.message]
    assert [e.location.line for e in depth_errors] == [i + 1 for i in deep]
    assert [(e.message, e.location) for e in errors if e not in depth_errors] == [
        (e.message, e.location) for e in want_errors
    ]


def test_the_pipeline_hands_the_decoded_lines_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The heavy lines' values reach the reader, with offsets into the bytes
    it is given, also when the chunk starts mid-line."""
    from trajgrade.formats.claude_code import ClaudeCodeReader

    seen: list[tuple[bytes, Any]] = []
    original = ClaudeCodeReader.feed_decoded

    def spy(self: Any, buf: Any, first: int, decoded: Any, **kw: Any) -> Any:
        seen.extend((bytes(buf[s:e]), v) for s, e, v in decoded)
        return original(self, buf, first, decoded, **kw)

    monkeypatch.setattr(ClaudeCodeReader, "feed_decoded", spy)
    heavy = [_claude(k, k % 2) for k in range(3)]
    body = b"\n".join([*CLAUDE.splitlines()[:2], *heavy]) + b"\n"
    dec = SourceDecoder("in.jsonl", fmt="claude-code", default_trace="in")
    dec.feed(body[:7])
    dec.feed(body[7:])
    dec.close()
    assert [line for line, _ in seen] == heavy
    assert [v for _, v in seen] == [json.loads(line) for line in heavy]
