"""Framing and batching: lines across chunks, limits, detection, batch grading."""

from __future__ import annotations

from tests._support import suite

from trajgrade.pipeline.decoder import SourceDecoder
from trajgrade.pipeline.whole import grade_bytes

LINE = b'{"type":"tool_call","trace_id":"t","name":"bash","call_id":"%d"}\n'


def test_lines_split_across_chunks_are_reassembled() -> None:
    """A line cut anywhere by chunking decodes once it completes."""
    data = b"".join(LINE % i for i in range(5))
    for cut in range(1, len(data)):
        dec = SourceDecoder("s")
        events = (
            dec.feed(data[:cut]).events
            + dec.feed(data[cut:]).events
            + dec.close().events
        )
        assert [e.call_id for e in events] == [str(i) for i in range(5)]  # type: ignore[union-attr]


def test_final_line_without_newline_counts() -> None:
    """The last line is decoded at close even without a trailing newline."""
    dec = SourceDecoder("s")
    assert dec.feed(LINE % 1 + (LINE % 2).rstrip()).events
    assert len(dec.close().events) == 1
    assert dec.offset == len(LINE % 1) + len(LINE % 2) - 1


def test_oversize_lines_are_skipped_and_located() -> None:
    """A line over the limit is dropped with its line number and trace id; the stream goes on."""
    big = (
        b'{"trace_id":"t3","type":"message","role":"user","text":"'
        + b"x" * 5000
        + b'"}\n'
    )
    dec = SourceDecoder("s", max_line_bytes=1024)
    batches = [
        dec.feed(LINE % 1),
        dec.feed(big[:3000]),
        dec.feed(big[3000:] + LINE % 2),
        dec.close(),
    ]
    errors = [e for b in batches for e in b.errors]
    events = [e for b in batches for e in b.events]
    (err,) = errors
    assert (err.location.line, err.trace_id) == (
        2,
        "t3",
    ) and "1,024-byte limit" in err.message
    assert [e.call_id for e in events] == ["1", "2"]  # type: ignore[union-attr]


def test_undetectable_first_line_is_reported_and_detection_retries() -> None:
    """An unreadable first line is reported; the next readable line sets the format."""
    batch = SourceDecoder("s").feed(b"garbage\n" + LINE % 1)
    assert batch.errors[0].location.line == 1 and "--format" in batch.errors[0].message
    assert len(batch.events) == 1


def test_grade_bytes_is_feed_all_then_finish() -> None:
    """Batch grading finishes every open trace."""
    s = suite("graders:\n  - {type: tool-call-count, config: {max: 1}}\n")
    result = grade_bytes(s, LINE % 1 + LINE % 2)
    (v,) = result.verdicts[-1:]
    assert v.final and not v.passed and v.metadata["value"] == 2


def test_detection_survives_odd_first_records() -> None:
    """A first record no format expects (a list as `type`) is undetectable, not a crash."""
    from trajgrade.formats import detect

    assert detect(b'{"type": [1]}') is None
    assert detect(b'{"type": {"a": 1}, "data": {}}') is None


def test_flushes_trace_answers_as_the_protocol_does() -> None:
    """The cached check of a reader's FlushesTrace agrees with isinstance for
    every built-in format's reader (and for an object that is no reader)."""
    from trajgrade.formats import BUILTIN, FlushesTrace, flushes_trace

    readers = [f.reader(source="s", default_trace="t") for f in BUILTIN.values()]
    assert any(isinstance(r, FlushesTrace) for r in readers)
    for reader in [*readers, object(), None]:
        assert flushes_trace(reader) is isinstance(reader, FlushesTrace)
        assert flushes_trace(reader) is isinstance(reader, FlushesTrace)  # cached
