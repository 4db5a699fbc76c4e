"""Line formats decode a whole buffer in one call; the result is the line loop's.

Every reader of one-JSON-record-a-line formats first tries one
``decode_lines`` over the buffer and falls back to reading line by line
when a line is not JSON. Both paths must give the same events, the same
errors at the same lines and fields, and the same line per event. A buffer
with one broken line at its end takes the line loop for all of it, so
comparing it with the clean buffer compares the two paths through the
public ``feed``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.formats._decode import feed_lines, raw
from tests.formats.test_every_adapter import RECORDED, WRITTEN

from trajgrade.formats import BUILTIN
from trajgrade.formats._lines import RecordReader
from trajgrade.formats.codex import CodexReader

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
BROKEN = b'{"not json\n'

#: The formats read through RecordReader's batched path (and Codex's).
LINE_FORMATS = sorted(
    name
    for name, fmt in BUILTIN.items()
    if isinstance(fmt.reader(source="x", default_trace="x"), RecordReader)
)


def _both(make: Any, data: bytes) -> tuple[Any, Any]:
    """(batched, line loop) results of two fresh readers, comparable by value."""
    fast = feed_lines(make(), data)
    slow = feed_lines(make(), data + BROKEN)
    return _plain(fast), _plain(slow)


def _plain(result: Any) -> tuple[list[bytes], list[tuple[Any, ...]], list[int]]:
    events, errors, lines = result
    return (
        [msgspec.json.encode(e) for e in events],
        [(e.message, e.location, e.trace_id) for e in errors],
        list(lines or []),
    )


def test_the_line_formats_are_the_ones_expected() -> None:
    assert {"codex", "vally", "letta", "otel", "agentv"} <= set(LINE_FORMATS)


@pytest.mark.parametrize("fmt", LINE_FORMATS)
def test_a_recorded_file_reads_the_same_on_both_paths(fmt: str) -> None:
    data = WRITTEN[fmt] if fmt in WRITTEN else raw(FIXTURES / RECORDED[fmt])
    fast, slow = _both(
        lambda: BUILTIN[fmt].reader(source="in.jsonl", default_trace="in"), data
    )
    events, errors, lines = slow
    n = data.count(b"\n") + 1
    assert errors[-1][1].line == n and "not valid JSON" in errors[-1][0]
    assert fast == (events, errors[:-1], lines)
    assert fast[0], "the file gives no events"


_RECORDS = st.lists(
    st.sampled_from(
        [
            {"type": "session_meta", "payload": {"id": "s1", "cwd": "/w"}},
            {"type": "session_meta", "payload": {"id": 7}},
            {"type": "session_meta", "payload": "x"},
            {"type": "response_item", "payload": {"type": "function_call"}},
            {
                "type": "response_item",
                "payload": {"type": "function_call", "name": "shell", "call_id": "c"},
            },
            {"type": "response_item", "payload": {"type": "function_call_output"}},
            {
                "type": "response_item",
                "payload": {"type": "function_call_output", "call_id": "c"},
            },
            {"type": "event_msg", "payload": {"type": "token_count", "info": {}}},
            {
                "type": "event_msg",
                "payload": {
                    "type": "token_count",
                    "info": {"total_token_usage": {"input_tokens": -1}},
                },
            },
            {"type": "thread.started", "thread_id": "t2"},
            {"type": 3},
            [1, 2],
            "text",
            {"id": ""},
        ]
    ),
    min_size=1,
    max_size=10,
)


@settings(max_examples=200, deadline=None)
@given(records=_RECORDS, blank=st.lists(st.integers(0, 10), max_size=3))
def test_codex_errors_are_located_the_same_on_both_paths(
    records: list[Any], blank: list[int]
) -> None:
    """Bad shapes, wrong types and non-objects give the same located errors
    (lines counted with blank lines among the records) on both paths."""
    lines = [msgspec.json.encode(r) for r in records]
    for i in sorted(blank, reverse=True):
        lines.insert(min(i, len(lines)), b"  ")
    data = b"\n".join(lines) + b"\n"
    fast, slow = _both(lambda: CodexReader(source="r.jsonl", default_trace="r"), data)
    assert fast == (slow[0], slow[1][:-1], slow[2])


@pytest.mark.parametrize("broken_after", [False, True], ids=["batched", "line loop"])
def test_a_reader_failure_on_one_record_is_located_on_both_paths(
    monkeypatch: pytest.MonkeyPatch, broken_after: bool
) -> None:
    """A record the reader fails on (a bug hostile input found) is one error
    at its own line, charged to the trace the line names; the records around
    it are read as without it."""
    from trajgrade.formats.vally import VallyReader

    real = VallyReader.record

    def record(self: VallyReader, rec: Any, n: int, events: Any, errors: Any) -> None:
        if rec.get("boom"):
            events.append(None)  # (a half-made event must be dropped too)
            raise KeyError("boom")
        real(self, rec, n, events, errors)

    monkeypatch.setattr(VallyReader, "record", record)
    good = b'{"type":"usage","input_tokens":5,"output_tokens":1}'
    bad = b'{"type":"usage","boom":true,"trace_id":"t9"}'
    data = b"\n".join([good, b"", b"  ", bad, good]) + b"\n"
    events, errors, lines = feed_lines(
        VallyReader(source="v.jsonl", default_trace="v"),
        data + (BROKEN if broken_after else b""),
    )
    assert lines == [1, 5] and all(e is not None for e in events)
    err = errors[0]
    assert (err.location.line, err.trace_id) == (4, "t9")
    assert "could not be read (KeyError" in err.message
    assert len(errors) == (2 if broken_after else 1)
