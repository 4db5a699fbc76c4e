"""cost-budget: reported cost, genai-prices (cache, dated prices), the user
table, warn_at, unknown models, the abort default, lazy import, and real
recorded sessions."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.graders._guard import drive, grader, recorded

from trajgrade import compile_suite, decode_config
from trajgrade.config.model import OnFail
from trajgrade.errors import ConfigError, ConfigErrors
from trajgrade.events import ToolCall, Usage
from trajgrade.verdicts import Action, Outcome

SONNET = "claude-sonnet-4-5-20250929"


def c(cid: str) -> ToolCall:
    return ToolCall(trace_id="t", name="Bash", call_id=cid, args={"command": "ls"})


def u(
    model: str | None = SONNET,
    cost: float | None = None,
    ts: float | None = None,
    **tokens: int,
) -> Usage:
    return Usage(trace_id="t", model=model, cost_usd=cost, ts=ts, **tokens)


def test_crossing_max_usd_seals_a_fail_and_every_later_call_is_judged() -> None:
    """With on_fail: deny the rule refuses each later call itself."""
    g = grader("cost-budget", "{max_usd: 0.10}", on_fail="deny")
    run = drive(g, [c("1"), u(cost=0.06), c("2"), u(cost=0.05), c("3"), c("4")])
    ((i, d),) = run.decisions
    assert i == 3 and d.outcome is Outcome.FAIL and not d.final
    assert [(e.call_id, j.rule, j.action) for _, e, j in run.judged] == [
        ("3", "max_usd", None),
        ("4", "max_usd", None),
    ]
    assert run.final.outcome is Outcome.FAIL and run.final.score == pytest.approx(0.9)
    assert run.final.metadata["value"] == pytest.approx(0.11)


def test_with_the_default_abort_the_engine_refuses_later_calls_not_the_rule() -> None:
    """The sealed fail at the usage event aborts the run; the engine then
    refuses every later call, so the rule judges none (no duplicates)."""
    g = grader("cost-budget", "{max_usd: 0.10}")
    assert g.on_fail == "abort"
    run = drive(g, [c("1"), u(cost=0.06), c("2"), u(cost=0.05), c("3"), c("4")])
    assert [(i, d.outcome, d.final) for i, d in run.decisions] == [
        (3, Outcome.FAIL, False)
    ]
    assert run.judged == []


def test_exactly_max_is_within_budget() -> None:
    run = drive(
        grader("cost-budget", "{max_usd: 0.5}"), [u(cost=0.25), u(cost=0.25), c("1")]
    )
    assert (
        not run.judged and run.final.outcome is Outcome.PASS and run.final.score == 1.0
    )


def test_tokens_are_priced_by_genai_prices_with_cache_prices() -> None:
    from genai_prices import Usage as GUsage
    from genai_prices import calc_price

    tokens = {
        "input_tokens": 120_000,
        "cache_read_tokens": 100_000,
        "cache_write_tokens": 15_000,
        "output_tokens": 2_000,
    }
    run = drive(grader("cost-budget", "{max_usd: 10}"), [u(ts=1.76e9, **tokens)])
    expected = calc_price(
        GUsage(**tokens),
        SONNET,
        genai_request_timestamp=datetime.fromtimestamp(1.76e9, UTC),
    )
    assert run.final.metadata["value"] == pytest.approx(
        float(expected.total_price), abs=1e-6
    )
    # cache reads cost a tenth of fresh input: far below 120k fresh tokens.
    fresh = drive(
        grader("cost-budget", "{max_usd: 10}"),
        [u(ts=1.76e9, input_tokens=120_000, output_tokens=2_000)],
    )
    assert run.final.metadata["value"] < fresh.final.metadata["value"] / 2


def test_prices_are_taken_at_the_event_date() -> None:
    """o3 cost $10 per million input tokens until 2025-06-10, then $2."""
    g = grader("cost-budget", "{max_usd: 100}")
    before = datetime(2025, 6, 1, tzinfo=UTC).timestamp()
    after = datetime(2025, 7, 1, tzinfo=UTC).timestamp()
    old = drive(g, [u("o3", ts=before, input_tokens=1_000_000)]).final.metadata["value"]
    new = drive(g, [u("o3", ts=after, input_tokens=1_000_000)]).final.metadata["value"]
    assert (old, new) == (pytest.approx(10.0), pytest.approx(2.0))


def test_a_reported_cost_wins_and_the_user_table_beats_genai_prices() -> None:
    g = grader(
        "cost-budget",
        "{max_usd: 100, prices: {"
        + SONNET
        + ": {input_mtok: 1, output_mtok: 2, cache_read_mtok: 0.5}}}",
    )
    run = drive(
        g,
        [
            u(cost=0.25, input_tokens=10**9),
            u(
                input_tokens=3_000_000,
                cache_read_tokens=2_000_000,
                output_tokens=1_000_000,
            ),
        ],
    )
    # 0.25 reported + 1M fresh x $1 + 2M cached x $0.5 + 1M out x $2
    assert run.final.metadata["value"] == pytest.approx(0.25 + 1 + 1 + 2)
    assert run.final.metadata["priced_from_tokens"] == 1


def test_warn_at_gives_the_next_call_one_warn_decision() -> None:
    g = grader("cost-budget", "{max_usd: 1.0, warn_at: 0.5}", on_fail="deny")
    run = drive(
        g,
        [
            c("1"),
            u(cost=0.4),
            c("2"),
            u(cost=0.2),
            u(cost=0.1),
            c("3"),
            c("4"),
            u(cost=0.5),
            c("5"),
        ],
    )
    assert [(e.call_id, j.rule, j.action) for _, e, j in run.judged] == [
        ("3", "warn_at", Action.WARN),
        ("5", "max_usd", None),
    ]
    assert "past 50% of the $1 budget" in run.judged[0][2].reason


@pytest.mark.parametrize(
    ("mode", "judged", "outcome"),
    [
        (
            "deny",
            [("2", "unknown_model", None), ("3", "unknown_model", None)],
            Outcome.FAIL,
        ),
        ("warn", [("2", "unknown_model", Action.WARN)], Outcome.PASS),
        ("ignore", [], Outcome.PASS),
    ],
)
def test_unknown_models(
    mode: str, judged: list[tuple[str, str, Action | None]], outcome: Outcome
) -> None:
    g = grader("cost-budget", f"{{max_usd: 1, unknown_model: {mode}}}", on_fail="deny")
    events = [
        c("1"),
        u("in-house-llm-7", input_tokens=50),
        u("in-house-llm-7", input_tokens=5),
        c("2"),
        c("3"),
        u(None, cost=0.1),
    ]
    run = drive(g, events)
    assert [(e.call_id, j.rule, j.action) for _, e, j in run.judged] == judged
    assert run.final.outcome is outcome and run.final.metadata["unknown_models"] == [
        "in-house-llm-7"
    ]


def test_usage_without_tokens_costs_nothing_whatever_the_model() -> None:
    run = drive(
        grader("cost-budget", "{max_usd: 1}"), [u("<synthetic>"), u(None), c("1")]
    )
    assert not run.judged and run.final.outcome is Outcome.PASS


def test_defaults_to_abort_and_checkpoints_change_nothing() -> None:
    suite = compile_suite(
        decode_config("graders:\n  - type: cost-budget\n    config: {max_usd: 1}\n")
    )
    assert suite.on_fail == {"cost-budget": OnFail.ABORT}
    g = suite.graders[0]
    events = [
        c("1"),
        u(input_tokens=200_000, output_tokens=20_000, ts=1.76e9),
        c("2"),
    ] * 4
    assert drive(g, events) == drive(g, events, checkpoint_every=1)


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ("{}", "max_usd"),
        ("{max_usd: -1}", "max_usd"),
        ("{max_usd: 1, warn_at: 1.5}", "warn_at"),
        ("{max_usd: 1, unknown_model: block}", "unknown_model"),
        # (the locator shows a mapping's values without their key)
        ("{max_usd: 1, prices: {m: {input: 3}}}", "prices.input"),
        ("{max_usd: 1, prices: {m: {input_mtok: -3}}}", "prices"),
    ],
)
def test_config_errors_name_the_field(config: str, field: str) -> None:
    with pytest.raises((ConfigError, ConfigErrors)) as info:
        grader("cost-budget", config)
    assert f"config.{field}" in str(info.value)


def test_genai_prices_is_imported_only_to_price_tokens() -> None:
    """A policy without cost-budget, and a budget fed reported costs, never
    load genai-prices (0.25 s of pydantic on the hook path)."""
    code = """
import sys
from trajgrade import compile_suite, decode_config
from trajgrade.events import Usage
s = compile_suite(decode_config("graders:\\n  - type: cost-budget\\n    config: {max_usd: 1}\\n"))
g = s.graders[0]; st = g.start(); g.step(st, Usage(cost_usd=0.5, model="x", input_tokens=9))
assert "genai_prices" not in sys.modules, "loaded by a reported cost"
g.step(st, Usage(model="gpt-4o", input_tokens=9))
assert "genai_prices" in sys.modules
"""
    subprocess.run([sys.executable, "-c", code], check=True)


def test_real_claude_code_session_is_stopped_when_it_passes_one_dollar() -> None:
    """claude-code/spotter_v2.1.39_long_session.jsonl.gz: Claude Sonnet 4.5
    tokens priced by genai-prices cross $0.50 (warn) and then $1."""
    events = recorded("claude-code/spotter_v2.1.39_long_session.jsonl.gz")
    run = drive(
        grader("cost-budget", "{max_usd: 1.0, warn_at: 0.5}", on_fail="deny"), events
    )
    (_, warned, w), (_, stopped, j), *_ = run.judged
    assert (w.rule, w.action) == ("warn_at", Action.WARN)
    assert warned.call_id == "toolu_01XK4qdtUEnYETQtLrNKXJBr"  # Write, call 13 of 150
    assert (
        j.rule == "max_usd" and stopped.call_id == "toolu_01EZz7XoSzAy5hr5zQ1a1YPK"
    )  # Edit, 22 of 150
    assert "cost $1.0508 exceeds" in j.reason
    assert run.final.outcome is Outcome.FAIL


def test_real_codex_session_is_stopped_when_it_passes_one_dollar() -> None:
    """codex/agentcmd_v0.40.0_turn_aborted_123_calls.jsonl.gz: token_count
    totals (gpt-5-codex) priced by genai-prices."""
    events = recorded("codex/agentcmd_v0.40.0_turn_aborted_123_calls.jsonl.gz")
    run = drive(grader("cost-budget", "{max_usd: 1.0}", on_fail="deny"), events)
    (_, stopped, j), *_ = run.judged
    assert (
        j.rule == "max_usd" and stopped.call_id == "call_gF6hESsx2lbez18BrxnorNWt"
    )  # shell, 71 of 123


@settings(max_examples=300, deadline=None)
@given(
    model=st.sampled_from(
        [SONNET, "claude-opus-4-1", "gpt-4o", "o3", "gemini-2.5-pro", "gpt-5-codex"]
    ),
    when=st.sampled_from(
        [datetime(2025, 5, 1, tzinfo=UTC), datetime(2025, 9, 1, tzinfo=UTC), None]
    ),
    fresh=st.integers(0, 400_000),
    read=st.integers(0, 300_000),
    write=st.integers(0, 50_000),
    out=st.integers(0, 100_000),
)
def test_per_tier_rates_equal_genai_prices_own_calculation(
    model: str, when: datetime | None, fresh: int, read: int, write: int, out: int
) -> None:
    """The rates taken once per price and tier give genai-prices' own figure
    for any usage (tiers switch on the request's input tokens)."""
    from genai_prices import Usage as GUsage
    from genai_prices import calc_price

    from trajgrade.graders.rules._prices import LATEST, PriceBook

    tokens = {
        "input_tokens": fresh + read + write,
        "cache_read_tokens": read,
        "cache_write_tokens": write,
        "output_tokens": out,
    }
    ts = None if when is None else when.timestamp()
    got = PriceBook(None).cost(u(model, ts=ts, **tokens))
    expected = calc_price(
        GUsage(**tokens), model, genai_request_timestamp=when or LATEST
    )
    assert got == pytest.approx(float(expected.total_price), rel=1e-9, abs=1e-12)
