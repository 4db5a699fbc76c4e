"""Streaming equals batch: ``Engine.feed`` one event at a time gives the same
verdicts as ``grade_bytes`` on the canonical JSONL of the same events, whole
or cut into chunks at arbitrary byte positions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import chunked, encode_jsonl, streams, suites

from trajgrade.engine.engine import Engine
from trajgrade.pipeline.whole import grade_bytes

if TYPE_CHECKING:
    from strategies import Stream, SuiteCase

    from trajgrade.verdicts import Verdict


def _streamed(case: SuiteCase, stream: Stream) -> list[Verdict]:
    engine = Engine(case.suite)
    out: list[Verdict] = []
    for ev in stream.events:
        out.extend(engine.feed(ev))
    out.extend(engine.finish())
    return out


def _finals(verdicts: list[Verdict]) -> dict[tuple[str, str], tuple[object, ...]]:
    finals: dict[tuple[str, str], tuple[object, ...]] = {}
    for v in verdicts:
        if v.final:
            key = (v.trace_id, v.grader)
            assert key not in finals, f"two final verdicts for {key}"
            finals[key] = (v.outcome, v.score, v.evidence, v.metadata)
    return finals


@settings(max_examples=150, deadline=None)
@given(case=suites(), stream=streams())
def test_feed_matches_grade_bytes(case: SuiteCase, stream: Stream) -> None:
    """Feeding events one by one gives exactly the verdicts grade_bytes gives on their JSONL."""
    streamed = _streamed(case, stream)
    result = grade_bytes(case.suite, encode_jsonl(stream.events))
    assert result.errors == []
    assert _finals(result.verdicts) == _finals(streamed)
    assert result.verdicts == streamed


@settings(max_examples=150, deadline=None)
@given(case=suites(), stream=streams(), data=st.data())
def test_chunked_bytes_match_feed(
    case: SuiteCase, stream: Stream, data: st.DataObject
) -> None:
    """Cutting the JSONL into chunks at arbitrary byte positions changes no verdict."""
    chunks = data.draw(chunked(encode_jsonl(stream.events)), label="chunks")
    streamed = _streamed(case, stream)
    result = grade_bytes(case.suite, iter(chunks))
    assert result.errors == []
    assert _finals(result.verdicts) == _finals(streamed)
    assert result.verdicts == streamed
