"""Early verdicts never flip: whatever a grader says before the trace ends
(sealed or final) is what its one final verdict says."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import maybe_untimed, streams, suites

from trajgrade.engine.engine import Engine

if TYPE_CHECKING:
    from strategies import Stream, SuiteCase

    from trajgrade.verdicts import Verdict


def _check_finality(
    verdicts: list[Verdict], trace_ids: list[str], graders: list[str]
) -> None:
    by_key: dict[tuple[str, str], list[Verdict]] = defaultdict(list)
    for v in verdicts:
        by_key[(v.trace_id, v.grader)].append(v)
    assert set(by_key) == {(t, g) for t in trace_ids for g in graders}
    for key, vs in by_key.items():
        finals = [v for v in vs if v.final]
        assert len(finals) == 1, f"{key}: {len(finals)} final verdicts"
        final = finals[0]
        assert vs[-1] is final, f"{key}: a verdict follows the final one"
        sealed = [v for v in vs if not v.final]
        assert len(sealed) <= 1, f"{key}: {len(sealed)} sealed verdicts"
        for v in sealed:
            assert v.early, f"{key}: a sealed verdict after the trace ended"
        for v in vs:
            if v.early:
                assert v.outcome == final.outcome, (
                    f"{key}: early {v.outcome} (final={v.final}) flipped to {final.outcome}"
                )


def _ids(stream: Stream) -> list[str]:
    return [tid for tid, evs in stream.traces.items() if evs]


@settings(max_examples=200, deadline=None)
@given(case=suites(), stream=streams())
def test_early_outcomes_equal_final_outcome(case: SuiteCase, stream: Stream) -> None:
    """Every early verdict's outcome is the final one's; one final per trace and grader."""
    engine = Engine(case.suite)
    verdicts = engine.feed_all(stream.events) + engine.finish()
    _check_finality(verdicts, _ids(stream), [g.name for g in case.suite.graders])
    assert engine.open_traces() == []


_CLOCK_DT = st.sampled_from([0.0, 0.05, 0.3, 1.2])
_TICK_DT = st.sampled_from([0.0, 0.7, 1.6, 4.0])


@settings(max_examples=300, deadline=None)
@given(case=suites(wall_time=True), stream=streams(end=False), data=st.data())
def test_early_outcomes_survive_clock_ticks(
    case: SuiteCase, stream: Stream, data: st.DataObject
) -> None:
    """With the runner's clock ticking between events, early outcomes still never flip."""
    events = maybe_untimed(data, stream.events)
    engine = Engine(case.suite)
    verdicts: list[Verdict] = []
    now = 0.0
    for ev in events:
        now += data.draw(_CLOCK_DT, label="dt")
        verdicts.extend(engine.feed(ev, now=now))
        if data.draw(st.booleans(), label="tick"):
            now += data.draw(_TICK_DT, label="tick dt")
            verdicts.extend(engine.tick(now))
    verdicts.extend(engine.finish())
    _check_finality(verdicts, _ids(stream), [g.name for g in case.suite.graders])
