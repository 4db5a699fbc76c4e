"""What the input says does not depend on how it was chunked.

One JSON record a line, whatever the chunking.

msgspec's ``decode_lines`` reads a stream of whitespace-separated JSON
values: two objects on one line, or one object over two lines, pass it. A
buffer decoded in one call would then shift every later record's line (an
anomaly's line past the buffer's last crashed the run), and a record over
two lines would be read whole, or rejected when a chunk boundary fell
between its lines. Such lines are rejected, located, however the input is
chunked, and the records around them keep their lines. A byte order
mark that arrives in pieces is still one. A bad record taints its trace
where it stands among the events: one after the trace's end changes
nothing, whether or not the end came in the same chunk.
"""

from __future__ import annotations

import json

import pytest
from tests._support import suite

from trajgrade.pipeline.decoder import SourceDecoder
from trajgrade.pipeline.whole import grade_bytes

A = b'{"trace_id":"a","type":"tool_call","name":"bash","args":{},"call_id":"1"}'
R = b'{"trace_id":"a","type":"tool_result","call_id":"9"}'
END = b'{"trace_id":"a","type":"trace_end"}'
TWO_ON_ONE = A + R + b"\n" + END + b"\n"
ONE_OVER_TWO = A + b"\n" + END[:20] + b"\n" + END[20:] + b"\n"
# A record cut inside a string is not JSON on either line.
CUT_IN_STRING = A + R + b"\n" + END[:20] + b"\n" + END[20:] + b"\n" + END + b"\n"


def _decode(data: bytes, fmt: str, size: int | None) -> tuple[list[str], list[int]]:
    dec = SourceDecoder("x.jsonl", fmt=fmt)
    events, lines = [], []
    chunks = (
        [data]
        if size is None
        else [data[i : i + size] for i in range(0, len(data), size)]
    )
    for chunk in chunks:
        batch = dec.feed(chunk)
        events += [type(e).__name__ for e in batch.events]
        lines += [e.location.line for e in batch.errors]
    end = dec.close()
    return events + [type(e).__name__ for e in end.events], lines + [
        e.location.line for e in end.errors
    ]


@pytest.mark.parametrize(
    ("data", "events", "bad"),
    [
        (TWO_ON_ONE, ["TraceEnd"], [1]),
        (ONE_OVER_TWO, ["ToolCall"], [2, 3]),
        (CUT_IN_STRING, ["TraceEnd"], [1, 2, 3]),
    ],
)
@pytest.mark.parametrize("size", [None, 1, 7, 64])
def test_each_line_is_one_record_whatever_the_chunking(
    data: bytes, events: list[str], bad: list[int], size: int | None
) -> None:
    assert _decode(data, "trajgrade", size) == (events, bad)


def test_an_anomaly_after_two_records_on_one_line_does_not_crash() -> None:
    """The orphan result used to be located past the buffer's last line."""
    policy = suite("graders:\n  - {type: tool-calls, config: {required: [bash]}}\n")
    out = grade_bytes(policy, TWO_ON_ONE + R + b"\n", source="x.jsonl")
    assert {v.trace_id for v in out.verdicts} == {"a"}


@pytest.mark.parametrize("fmt", ["vally", "letta", "gemini-stream-json"])
def test_record_readers_reject_two_records_on_one_line(fmt: str) -> None:
    """The readers built on the shared line skeleton take the same check."""
    line = json.dumps({"kind": "x"}).encode()
    whole = _decode(line + line + b"\n" + line + b"\n", fmt, None)[1]
    assert whole[:1] == [1]
    assert whole == _decode(line + line + b"\n" + line + b"\n", fmt, 1)[1]


@pytest.mark.parametrize("size", [None, 1, 2, 3, 4])
def test_a_byte_order_mark_in_pieces_is_still_not_part_of_line_1(
    size: int | None,
) -> None:
    data = b"\xef\xbb\xbf" + A + b"\n" + END + b"\n"
    assert _decode(data, "trajgrade", size) == (["ToolCall", "TraceEnd"], [])


@pytest.mark.parametrize("size", [None, 40, 7])
def test_a_bad_record_after_the_end_taints_nothing_whatever_the_chunking(
    size: int | None,
) -> None:
    # (A grader that decides at the end: a taint shows in its verdict.)
    policy = suite("graders:\n  - {type: tool-call-count, config: {max: 5}}\n")
    answered = b'{"trace_id":"a","type":"tool_result","call_id":"1"}\n'
    broken = b'{"trace_id":"a","type":"tool_call","name":\n'
    data = A + b"\n" + answered + END + b"\n" + broken
    chunks = (
        [data]
        if size is None
        else [data[i : i + size] for i in range(0, len(data), size)]
    )
    out = grade_bytes(policy, chunks, source="x.jsonl")
    assert [(v.outcome.value, v.final) for v in out.verdicts] == [("pass", True)]
    assert [e.location.line for e in out.errors] == [4]


def test_a_lone_surrogate_escape_is_read_as_the_replacement_character() -> None:
    """Node agents write an unpaired surrogate as ``\\ud800``; msgspec refuses
    it. The line is read with U+FFFD there (not lost, its trace not tainted),
    and a well-formed pair or an escaped backslash is left alone."""
    lone = b'{"trace_id":"a","type":"tool_call","name":"bash","args":{"command":"ls \\\\x \\ud800 \\ud83d\\ude00"},"call_id":"1"}'
    dec = SourceDecoder("x.jsonl", fmt="trajgrade")
    batch = dec.feed(lone + b"\n" + END + b"\n")
    assert batch.errors == []
    assert batch.events[0].args == {"command": "ls \\x \ufffd \U0001f600"}  # type: ignore[union-attr]


def test_a_claude_code_line_with_a_lone_surrogate_is_read() -> None:
    from pathlib import Path

    from tests.formats._decode import decode, raw

    fixtures = Path(__file__).parents[1] / "fixtures" / "claude-code"
    data = raw(next(fixtures.glob("live_*_transcript.jsonl")))
    assert b'"text":"' in data
    spoiled = data.replace(b'"text":"', b'"text":"\\udc00', 1)
    events, errors = decode(spoiled, fmt="claude-code")
    assert errors == []
    assert len(events) == len(decode(data, fmt="claude-code")[0])
