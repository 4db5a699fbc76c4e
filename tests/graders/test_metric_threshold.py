"""vally metric thresholds: sealed-then-final streaming, scores, durations, config."""

from __future__ import annotations

import pytest
from tests._support import call, end, finals, one, run, turn, usage

from trajgrade import Engine
from trajgrade.errors import ConfigError
from trajgrade.events import AgentError, Message
from trajgrade.graders.vally.metric_threshold import parse_duration_ms
from trajgrade.verdicts import Outcome


def test_crossing_max_seals_a_fail_at_once_and_final_score_follows() -> None:
    """Over budget: a sealed (non-final) fail immediately, the final score at trace end."""
    s = one("tool-call-count", "max: 4")
    out = run(s, [call("a")] * 6 + [end()])
    assert [(i, v.final, v.outcome) for i, v in out] == [
        (4, False, Outcome.FAIL),
        (6, True, Outcome.FAIL),
    ]
    assert out[0][1].score == pytest.approx(0.75) and out[1][1].score == pytest.approx(
        0.5
    )
    assert out[0][1].id != out[1][1].id


def test_score_reaching_zero_is_final_early() -> None:
    """At 2x max nothing can change any more, so the verdict is final then."""
    s = one("token-budget", "max: 100")
    out = run(s, [usage(150, 60), usage(1, 1), end()])
    ((i, v),) = out
    assert (
        i == 0
        and v.final
        and v.score == 0.0
        and v.metadata == {"value": 210, "max": 100}
    )


def test_within_budget_passes_at_end() -> None:
    """A trace within budget passes with score 1 and vally's evidence text."""
    v = finals(one("turn-count", "max: 3"), [turn(), turn(), end()])[
        ("t", "turn-count")
    ]
    assert v.passed and v.score == 1.0 and v.evidence == "2 turns (within budget of 3)"


def test_error_count_counts_error_events_only_by_default() -> None:
    """Tool results flagged is_error are counted only with include_tool_errors."""
    from tests._support import result

    events = [
        call("a", "1"),
        result("1", "boom", error=True),
        AgentError(trace_id="t", message="x"),
        end(),
    ]
    plain = finals(one("error-count", "max: 1"), events)[("t", "error-count")]
    both = finals(one("error-count", "max: 1\ninclude_tool_errors: true"), events)[
        ("t", "error-count")
    ]
    assert plain.metadata["value"] == 1 and plain.passed
    assert both.metadata["value"] == 2 and not both.passed


def test_wall_time_uses_event_timestamps() -> None:
    """wall-time is last minus first event time, in milliseconds."""
    s = one("wall-time", "max: '1m'")
    events = [
        Message(trace_id="t", role="user", text="hi", ts=100.0),
        Message(trace_id="t", role="assistant", text="yo", ts=190.0),
        end(),
    ]
    v = finals(s, events)[("t", "wall-time")]
    assert v.metadata == {"value": 90000, "max": "1m"} and v.score == pytest.approx(0.5)


def test_wall_time_fires_on_the_runner_clock_without_events() -> None:
    """tick(now) fails a live trace that stopped producing events."""
    s = one("wall-time", "max: '2s'")
    engine = Engine(s)
    assert engine.feed(Message(trace_id="t", role="user", text="go"), now=1000.0) == []
    assert engine.tick(1001.5) == []
    (v,) = engine.tick(1003.0)
    assert v.outcome is Outcome.FAIL and not v.final and v.metadata["value"] == 3000
    (v2,) = engine.tick(1004.0)
    assert v2.final and v2.score == 0.0


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("30s", 30_000),
        ("2m", 120_000),
        ("1h", 3_600_000),
        ("500ms", 500),
        ("1m30s", 90_000),
        ("1.5s", 1500),
    ],
)
def test_durations_parse(text: str, ms: float) -> None:
    """Duration strings accept s, m, h, ms, fractions and combinations."""
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["soon", "", "30", "1x", "s30", "1m 30s"])
def test_bad_durations_are_rejected(text: str) -> None:
    """Anything that is not a duration is None."""
    assert parse_duration_ms(text) is None


@pytest.mark.parametrize(
    ("grader", "config", "text"),
    [
        ("token-budget", "{}", "missing required field `max`"),
        ("tool-call-count", "max: -1", "max"),
        ("turn-count", "max: 2.5", "expected `int`, got `float` for `max`"),
        ("token-budget", "max: .inf", "max"),
        ("wall-time", "max: 120", "a bare number has no unit"),
        ("wall-time", "max: soon", "duration string"),
        ("error-count", "max: 0\nmax_errors: 2", "unknown field `max_errors`"),
    ],
)
def test_config_validation(grader: str, config: str, text: str) -> None:
    """Invalid max values are configuration errors naming `max`."""
    with pytest.raises(ConfigError, match="max") as info:
        one(grader, config)
    assert text in str(info.value)
