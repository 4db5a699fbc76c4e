"""Interleaving: traces sharing one stream are graded exactly as if each had
the engine to itself."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from hypothesis import given, settings
from strategies import streams, suites

from trajgrade.engine.engine import Engine

if TYPE_CHECKING:
    from strategies import Stream, SuiteCase

    from trajgrade.events import Event
    from trajgrade.verdicts import Verdict


def _alone(case: SuiteCase, events: list[Event]) -> list[Verdict]:
    engine = Engine(case.suite)
    return engine.feed_all(events) + engine.finish()


@settings(max_examples=150, deadline=None)
@given(case=suites(), stream=streams(max_traces=4))
def test_interleaved_traces_grade_as_if_alone(case: SuiteCase, stream: Stream) -> None:
    """Per trace, the verdicts of an interleaved stream equal those of the trace fed alone."""
    engine = Engine(case.suite)
    mixed: dict[str, list[Verdict]] = defaultdict(list)
    for ev in stream.events:
        for v in engine.feed(ev):
            mixed[v.trace_id].append(v)
    for v in engine.finish():
        mixed[v.trace_id].append(v)
    for tid, events in stream.traces.items():
        assert mixed.get(tid, []) == _alone(case, events), f"trace {tid}"


@settings(max_examples=100, deadline=None)
@given(case=suites(), stream=streams(max_traces=4))
def test_feed_many_equals_feed_one_by_one(case: SuiteCase, stream: Stream) -> None:
    """Feeding an interleaved stream in one feed_many call equals feeding it event by event."""
    one_by_one = Engine(case.suite)
    singles = [v for ev in stream.events for v in one_by_one.feed(ev)]
    many = Engine(case.suite)
    assert many.feed_many(stream.events) == singles
    assert many.finish() == one_by_one.finish()
    assert many.statistics() == one_by_one.statistics()
