"""Per-trace state stays bounded whatever a trace holds: calls whose results
never come, a subset check over very many calls, extractors that keep text.

Each bound is a constant a real trace rarely reaches; these tests reach it
through the user's path (config text -> compiled suite -> events -> verdict)
and pin what happens past it. tests/properties/test_bounded_state.py checks
the same bounds on random suites and streams.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
import yaml
from tests._support import call, end, finals, one, result, suite

from trajgrade import BuildContext, ConfigError, Engine, compile_suite, decode_config
from trajgrade.config.model import Suite
from trajgrade.events import (
    OPEN_CALLS_MAX,
    Event,
    Message,
    ToolCall,
    ToolResult,
    TurnStart,
    Usage,
)
from trajgrade.graders.agentv._score import SUBSET_LISTED_MAX
from trajgrade.graders.letta._extract import EXTRACT_MAX
from trajgrade.graders.vally.metric_threshold import MAX_BUDGET
from trajgrade.verdicts import Outcome, Verdict

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "letta"


def _unanswered(n: int, name: str = "ls") -> list[Event]:
    return [call(name, f"u{i}") for i in range(n)]


def _final(s: Suite, events: list[Event]) -> Verdict:
    """The final verdict of a one-grader suite on trace ``t``."""
    (v,) = finals(s, events).values()
    return v


def _state_bytes(engine: Engine) -> int:
    return len(msgspec.msgpack.encode(engine.checkpoint()))


# ------------------------------------------------------------ open calls
def test_a_result_after_the_open_call_bound_pairs_with_nothing() -> None:
    """vally: a required call counts once its result comes, but not when more
    than OPEN_CALLS_MAX newer calls are still open by then."""
    s = one("tool-calls", "required: ['^bash$']")
    first = [call("bash", "b")]
    in_time = _final(s, [*first, *_unanswered(OPEN_CALLS_MAX - 1), result("b"), end()])
    too_late = _final(s, [*first, *_unanswered(OPEN_CALLS_MAX), result("b"), end()])
    assert in_time.outcome is Outcome.PASS
    assert too_late.outcome is Outcome.FAIL
    assert "0 of 1 matching completed call" in too_late.evidence


def test_unanswered_calls_do_not_grow_a_traces_state() -> None:
    """Every grader that pairs results keeps at most OPEN_CALLS_MAX calls: the
    checkpoint of a trace stops growing once that many are open."""
    s = suite(
        """
        graders:
          - type: tool-calls
            config: {required: ['^bash$'], disallowed: [{name: '^ls$', result: 'x'}]}
          - type: tool_trajectory
            config: {mode: in_order, expected: [{tool: ls, max_duration_ms: 5}]}
        """
    )
    engine = Engine(s)
    engine.feed_many(_unanswered(OPEN_CALLS_MAX))
    at_bound = _state_bytes(engine)
    engine.feed_many([call("ls", f"v{i}") for i in range(OPEN_CALLS_MAX)])
    assert _state_bytes(engine) <= at_bound + 1024


def test_a_latency_check_whose_call_is_dropped_is_skipped() -> None:
    """agentv: a call dropped past the bound gives no duration, as a call whose
    result never comes: the check is a warning, out of the denominator."""
    s = one(
        "tool_trajectory",
        "mode: in_order\nexpected: [{tool: ls, max_duration_ms: 5}, {tool: cat}]",
    )
    fast = ToolResult(trace_id="t", call_id="a", result="ok", duration_ms=1.0)
    late = [call("ls", "a"), *_unanswered(OPEN_CALLS_MAX, "cat"), fast, end()]
    never = [call("ls", "a"), *_unanswered(OPEN_CALLS_MAX, "cat"), end()]
    for events in (late, never):
        v = _final(s, events)
        assert v.score == 1.0
        assert v.metadata["warnings"] == [
            "No duration data for ls; latency assertion skipped"
        ]


# ------------------------------------------------------------ agentv subset
def test_a_subset_check_lists_the_first_calls_and_counts_the_rest() -> None:
    s = one("tool_trajectory", "mode: subset\nexpected: [{tool: ls}]")
    n = SUBSET_LISTED_MAX + 500
    events: list[Event] = [
        call("rm" if i in (3, SUBSET_LISTED_MAX + 7) else "ls", f"c{i}")
        for i in range(n)
    ]
    engine = Engine(s)
    engine.feed_many(events)
    (snap,) = engine.checkpoint().traces
    assert snap.states[0] is not None and len(snap.states[0]) < 60_000
    v = _final(s, [*events, end()])
    assert v.score == (n - 2) / n
    misses = v.metadata["misses"]
    assert misses == [
        "Position 3: rm is not in allowed set",
        f"Positions {SUBSET_LISTED_MAX}-{n - 1}: 1 more calls not in allowed set",
    ]
    hits = v.metadata["hits"]
    assert len(hits) == SUBSET_LISTED_MAX
    assert hits[-1] == (
        f"Positions {SUBSET_LISTED_MAX}-{n - 1}: 499 more calls in allowed set"
    )


def test_a_subset_check_within_the_listing_is_agentvs_text() -> None:
    s = one("tool_trajectory", "mode: subset\nexpected: [{tool: ls}]")
    events = [call("ls", f"c{i}") for i in range(SUBSET_LISTED_MAX)]
    v = _final(s, [*events, end()])
    assert v.score == 1.0
    assert (
        v.metadata["hits"][-1]
        == f"Position {SUBSET_LISTED_MAX - 1}: ls is in allowed set"
    )


# ------------------------------------------------------------ letta extractors
def _letta(extractor: str, **more: object) -> tuple[Engine, str]:
    metric = {"kind": "tool", "function": "contains", "extractor": extractor, **more}
    text = yaml.safe_dump({"graders": {"m": {"kind": "tool", **metric}}})
    s = compile_suite(
        decode_config(text, name="suite.yaml"),
        context=BuildContext(allow_code=True, base_dir=str(FIXTURES)),
    )
    return Engine(s, samples={"t": {"input": "q", "ground_truth": "needle"}}), "m"


def _say(text: str) -> Message:
    return Message(trace_id="t", role="assistant", text=text)


CHUNK = "x" * 2**20  # a 1 Mi-character assistant message


def test_all_assistant_past_the_bound_is_an_error_naming_a_way_out() -> None:
    engine, name = _letta("all_assistant")
    engine.feed_many([_say(CHUNK) for _ in range(EXTRACT_MAX // len(CHUNK))])
    below = _state_bytes(engine)
    engine.feed_many([_say("needle"), *[_say(CHUNK) for _ in range(20)]])
    assert _state_bytes(engine) < below // 4  # the text was let go
    (v,) = [v for v in engine.finish() if v.grader == name]
    assert v.outcome is Outcome.ERROR
    assert f"more than {EXTRACT_MAX:,} characters" in v.evidence
    assert "last_assistant" in v.evidence


def test_all_assistant_within_the_bound_grades_the_whole_text() -> None:
    engine, name = _letta("all_assistant")
    n = EXTRACT_MAX // len(CHUNK) - 1
    engine.feed_many([*[_say(CHUNK) for _ in range(n)], _say("needle")])
    (v,) = [v for v in engine.finish() if v.grader == name]
    assert v.outcome is Outcome.PASS


def test_last_turn_only_keeps_the_bound_per_turn() -> None:
    """Only the last turn is extracted: an earlier turn past the bound is let
    go with its text, and the last one is graded."""
    engine, name = _letta("last_turn")
    long_turn = [TurnStart(trace_id="t"), *[_say(CHUNK) for _ in range(9)]]
    engine.feed_many([*long_turn, TurnStart(trace_id="t"), _say("needle")])
    (v,) = [v for v in engine.finish() if v.grader == name]
    assert v.outcome is Outcome.PASS


def test_a_custom_extractor_past_the_bound_is_an_error() -> None:
    engine, name = _letta("custom_graders.py:tool_names")
    calls = [
        ToolCall(trace_id="t", name="search", call_id=f"c{i}", args_raw=CHUNK)
        for i in range(EXTRACT_MAX // len(CHUNK) + 1)
    ]
    engine.feed_many(calls)
    (v,) = [v for v in engine.finish() if v.grader == name]
    assert v.outcome is Outcome.ERROR
    assert f"more than {EXTRACT_MAX:,} characters" in v.evidence


@pytest.mark.parametrize("extractor", ["all_assistant", "custom_graders.py:tool_names"])
def test_extraction_below_the_bound_is_unchanged(extractor: str) -> None:
    engine, name = _letta(extractor)
    engine.feed_many([_say("needle"), ToolCall(trace_id="t", name="needle")])
    (v,) = [v for v in engine.finish() if v.grader == name]
    assert v.outcome is Outcome.PASS


# ------------------------------------------------------------ budgets
def test_a_token_total_past_64_bits_cannot_break_a_checkpoint() -> None:
    """Two usage events of the largest counts a line can hold (2**64 - 1
    each way) under the largest budget: the total is either kept (under
    twice the budget, well within msgpack's 64 bits) or the trace's fail is
    final and its state gone, so a checkpoint can always be written. A
    budget of 2**64 made the total unwritable (OverflowError)."""
    huge = 2**64 - 1
    s = one("token-budget", f"max: {MAX_BUDGET}")
    engine = Engine(s)
    sealed = engine.feed(Usage(trace_id="t", input_tokens=MAX_BUDGET + 1))
    assert [(v.outcome, v.final) for v in sealed] == [(Outcome.FAIL, False)]
    assert _state_bytes(engine)
    final = engine.feed(Usage(trace_id="t", input_tokens=huge, output_tokens=huge))
    assert [(v.outcome, v.final) for v in final] == [(Outcome.FAIL, True)]
    assert _state_bytes(engine)


def test_a_budget_past_what_vally_holds_exactly_is_refused() -> None:
    """vally's budgets are JavaScript numbers: exact up to 2**53 - 1."""
    with pytest.raises(
        ConfigError, match=r"config\.max: expected `int` <= 9007199254740991"
    ):
        one("token-budget", f"max: {MAX_BUDGET + 1}")
