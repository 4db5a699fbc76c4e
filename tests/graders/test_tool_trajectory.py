"""agentv tool_trajectory: scoring, streaming finality, config parsing."""

from __future__ import annotations

import math
import textwrap
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests._support import call, end, finals, one, run, suite

from trajgrade.config.model import Suite
from trajgrade.errors import ConfigError, ConfigErrors
from trajgrade.events import Event, Message, ToolCall, ToolResult
from trajgrade.graders import BuildContext, lookup
from trajgrade.graders.agentv._args import UNDEFINED, compile_args, deep_equal
from trajgrade.graders.agentv.tool_trajectory import TrajectoryState
from trajgrade.verdicts import Outcome, Verdict

KEY = ("t", "tool_trajectory")


def tt(config: str) -> Suite:
    """A suite of one tool_trajectory grader (trajgrade layout)."""
    return one("tool_trajectory", config)


def agentv(entry: str, threshold: float | None = None) -> Suite:
    """A suite from an agentv eval file with one evaluator entry."""
    body = textwrap.indent(textwrap.dedent(entry).strip(), "      ")
    extra = f"  threshold: {threshold}\n" if threshold is not None else ""
    return suite(f"execution:\n{extra}  evaluators:\n    -\n{body}\n")


def took(cid: str, ms: float | None) -> ToolResult:
    return ToolResult(trace_id="t", call_id=cid, result="ok", duration_ms=ms)


def say(text: str = "hi", role: str = "assistant") -> Message:
    return Message(trace_id="t", role=role, text=text)


def final(s: Suite, events: list[Event]) -> Verdict:
    return finals(s, events)[KEY]


# ------------------------------------------------------------------ modes
def test_any_order_seals_at_the_last_minimum_and_counts_the_whole_trace() -> None:
    """Extra calls never lower any_order hits, so the pass is sealed when the last
    minimum is met; the final verdict counts every call, as agentv's texts do."""
    s = tt("mode: any_order\nminimums: {search: 2, fetch: 1}")
    events = [call("search"), call("fetch"), call("search"), call("search"), end()]
    (idx, sealed), (last, v) = run(s, events)
    assert idx == 2 and not sealed.final and sealed.passed and sealed.score == 1
    assert last == 4 and v.final and v.passed and v.score == 1
    assert v.metadata["hits"] == [
        "search: called 3 times (required >=2)",
        "fetch: called 1 times (required >=1)",
    ]


def test_any_order_scores_the_fraction_of_minimums_met() -> None:
    """Unmet minimums are misses with agentv's text; the score is hits / minimums."""
    v = final(tt("mode: any_order\nminimums: {a: 1, b: 2}"), [call("b"), end()])
    assert v.score == 0 and v.metadata["aspects"] == 2
    assert v.evidence == (
        "a: called 0 times (required >=1); b: called 1 times (required >=2)"
    )


def test_any_order_zero_minimums_pass_at_the_first_output() -> None:
    """Minimums of 0 are met from the start, but only output rules out 'no trace'."""
    out = run(tt("mode: any_order\nminimums: {a: 0}"), [say("hi", "user"), say()])
    (idx, sealed), (last, v) = out
    assert idx == 1 and sealed.passed and last == 2 and v.final and v.passed


def test_fractional_minimum_needs_the_next_whole_count() -> None:
    """A minimum of 1.5 is met by the second call, as `actual >= 1.5` is."""
    out = run(tt("mode: any_order\nminimums: {a: 1.5}"), [call("a"), call("a")])
    (idx, v), _ = out
    assert idx == 1 and "required >=1.5" in v.evidence


def test_in_order_is_sealed_when_the_cursor_passes_the_last_item() -> None:
    """Other calls between items are skipped; the last item's call decides."""
    s = tt("mode: in_order\nexpected: [{tool: a}, {tool: b}]")
    out = run(s, [call("a"), call("x"), call("b"), call("b"), end()])
    (idx, sealed), (last, v) = out
    assert idx == 2 and sealed.passed and last == 4 and v.final and v.passed
    assert v.metadata["hits"] == ["Found a at position 0", "Found b at position 2"]


def test_in_order_args_mismatch_consumes_the_call_and_seals_the_fail() -> None:
    """A same-name call with other args decides the item (no retry); 1 of 2 can no longer reach 0.8."""
    s = tt("mode: in_order\nexpected: [{tool: s, args: {q: b}}, {tool: t}]")
    out = run(s, [call("s", q="a"), call("s", q="b"), call("t"), end()])
    (idx, sealed), (_, v) = out
    assert idx == 0 and not sealed.final and sealed.outcome is Outcome.FAIL
    assert idx == 0 and v.final and v.score == 0.5 and not v.passed
    assert v.metadata["misses"] == [
        "Expected s at position 0: tool found at 0 but args mismatch"
    ]


def test_in_order_missing_item_consumes_the_rest_of_the_trace() -> None:
    """Looking for a missing item scans to the end, so every later item misses too."""
    s = tt("mode: in_order\nexpected: [{tool: a}, {tool: b}, {tool: c}]")
    v = final(s, [call("a"), call("c"), end()])
    assert math.isclose(v.score, 1 / 3) and v.metadata["misses"] == [
        "Expected b at position 1, not found in remaining trace",
        "Expected c at position 2, not found in remaining trace",
    ]


def test_exact_decides_each_position_as_its_call_arrives() -> None:
    """A wrong tool at position 0 of 2 seals the fail at once; the final verdict comes at the end."""
    s = tt("mode: exact\nexpected: [{tool: a}, {tool: b}]")
    out = run(s, [call("x"), call("b"), end()])
    (idx, sealed), (last, v) = out
    assert idx == 0 and not sealed.final and sealed.outcome is Outcome.FAIL
    assert last == 2 and v.final and v.score == 0.5
    assert v.metadata["misses"] == ["Position 0: expected a, got x"]


def test_exact_extra_calls_do_not_lower_the_score() -> None:
    """As in agentv, calls beyond the expected length are a reported miss, not an
    aspect: the pass is sealed at the first call, the final verdict reports the miss."""
    s = tt("mode: exact\nexpected: [{tool: a}]")
    (idx, sealed), (last, v) = run(s, [call("a"), call("b"), end()])
    assert idx == 0 and not sealed.final and sealed.passed
    assert last == 2 and v.final and v.score == 1 and v.passed
    assert v.metadata["misses"] == ["Expected 1 tool calls, got 2"]


def test_exact_short_trace_misses_the_tail() -> None:
    """Positions with no call are 'got nothing' misses; the length miss comes first."""
    v = final(tt("mode: exact\nexpected: [{tool: a}, {tool: b}]"), [call("a"), end()])
    assert v.metadata["misses"] == [
        "Expected 2 tool calls, got 1",
        "Position 1: expected b, got nothing",
    ]


def test_latency_waits_for_the_duration_on_the_result() -> None:
    """A matched item with max_duration_ms is final only when its call's result brings a duration."""
    s = tt("mode: in_order\nexpected: [{tool: Read, max_duration_ms: 100}]")
    out = run(s, [call("Read", "c1"), call("x", "c2"), took("c1", 45), end()])
    (idx, sealed), (_, v) = out
    assert idx == 2 and sealed.passed and v.final and v.metadata["aspects"] == 2
    assert v.metadata["hits"][1] == "Read completed in 45ms (max: 100ms)"


def test_slow_call_is_a_latency_miss() -> None:
    """Over the limit is a miss with agentv's text; the sequence hit still counts."""
    s = tt("mode: exact\nexpected: [{tool: Read, max_duration_ms: 50}]")
    v = final(s, [call("Read", "c1"), took("c1", 120), end()])
    assert v.score == 0.5 and v.metadata["misses"] == ["Read took 120ms (max: 50ms)"]


def test_missing_duration_is_neutral_with_a_warning() -> None:
    """No duration: the latency aspect leaves the denominator and a warning is reported."""
    s = tt("mode: in_order\nexpected: [{tool: Read, max_duration_ms: 100}]")
    v = final(s, [call("Read", "c1"), took("c1", None), end()])
    assert v.score == 1 and v.metadata["aspects"] == 1
    assert v.metadata["warnings"] == [
        "No duration data for Read; latency assertion skipped"
    ]


def test_latency_of_an_unmatched_item_stays_in_the_denominator() -> None:
    """A limit on an item whose sequence check failed is an implicit miss."""
    s = tt("mode: exact\nexpected: [{tool: Read, max_duration_ms: 100}]")
    v = final(s, [call("Write", "c1"), took("c1", 10), end()])
    assert v.score == 0 and v.metadata["aspects"] == 2


def test_superset_gives_each_item_the_first_unused_matching_call() -> None:
    """Matched calls are consumed, so a second identical item needs a second call."""
    s = tt("mode: superset\nexpected: [{tool: s}, {tool: s}]")
    v = final(s, [call("s"), end()])
    assert v.score == 0.5 and v.metadata["hits"] == ["Found s at position 0"]
    out = run(s, [call("x"), call("s"), call("s"), end()])
    (idx, sealed), (_, v2) = out
    assert idx == 2 and sealed.passed and v2.final and v2.passed


def test_subset_is_decided_only_at_the_end() -> None:
    """Every call can still move a subset score, so nothing is final before trace_end."""
    s = tt("mode: subset\nexpected: [{tool: read}]")
    out = run(s, [call("read"), call("rm"), end()])
    ((idx, v),) = out
    assert idx == 2 and v.score == 0.5
    assert v.metadata["misses"] == ["Position 1: rm is not in allowed set"]


def test_empty_expectations_pass_once_there_is_output() -> None:
    """Empty minimums/expected score 1 with agentv's texts and no aspects."""
    v = final(tt("mode: superset\nexpected: []"), [say(), end()])
    assert v.passed and v.metadata["hits"] == ["No expected tools specified"]
    v = final(tt("mode: subset\nexpected: []"), [call("a"), end()])
    assert v.score == 0 and v.metadata["misses"] == [
        "1 unexpected tool call(s) with empty allowed list"
    ]


def test_no_calls_and_no_output_is_no_trace() -> None:
    """Without a tool call or an output message the score is 0 ('No trace available')."""
    s = tt("mode: any_order\nminimums: {}")
    v = final(s, [say("prompt", "user"), end()])
    assert v.score == 0 and v.evidence == "No trace available for evaluation"
    assert final(s, [say(), end()]).passed


# ------------------------------------------------------------------ args
def test_default_args_match_is_superset_and_agentv_271_is_exact() -> None:
    """The documented partial match is the default; agentv>=2.7.1 compares exactly."""
    body = "mode: exact\nexpected: [{tool: s, args: {q: x}}]"
    events: list[Event] = [call("s", q="x", limit=5), end()]
    assert final(tt(body), events).passed
    assert not final(tt(body + "\nagentv_compat: agentv>=2.7.1"), events).passed


def test_item_args_match_overrides_the_grader_level() -> None:
    """Item args_match beats the grader's, which beats the default (camelCase accepted)."""
    body = """
        mode: exact
        argsMatch: exact
        expected:
          - {tool: s, args: {q: x}, args_match: superset}
          - {tool: t, args: {q: x}}
    """
    v = final(tt(body), [call("s", q="x", n=1), call("t", q="x", n=1), end()])
    assert v.metadata["hits"] == ["Position 0: s"] and v.score == 0.5


def test_string_input_never_matches_an_object_expectation() -> None:
    """agentv does not parse a JSON-string input, so {q: x} never equals it."""
    raw = ToolCall(trace_id="t", name="s", args_raw='{"q": "x"}')
    assert not final(
        tt("mode: exact\nexpected: [{tool: s, args: {q: x}}]"), [raw]
    ).passed
    assert final(tt("mode: exact\nexpected: [{tool: s, args: any}]"), [raw]).passed


def test_deep_equal_is_javascript_strict() -> None:
    """10 != '10', true != 1, NaN != NaN, arrays are ordered, 10 == 10.0."""
    assert not deep_equal(10, "10")
    assert not deep_equal(True, 1)
    assert not deep_equal(math.nan, math.nan)
    assert not deep_equal([1, 2], [2, 1])
    assert deep_equal(10, 10.0) and deep_equal({"a": [1, None]}, {"a": [1, None]})
    assert not deep_equal({"a": 1}, {"a": 1, "b": 2})


def test_args_modes_match_as_agentv() -> None:
    """superset is partial at the top level only; subset forbids extra keys; paths skip unset fields."""
    sup = compile_args({"c": {"q": 1}}, "superset")
    sub = compile_args({"q": 1, "n": 2}, "subset")
    paths = compile_args({"c": {"q": 1}}, ("c.q", "c.z"))
    assert sup is not None and sub is not None and paths is not None
    assert not sup({"c": {"q": 1, "n": 2}}) and sup({"c": {"q": 1}, "x": 0})
    assert sub({"q": 1}) and not sub({"q": 1, "x": 0}) and not sub(UNDEFINED)
    assert paths({"c": {"q": 1, "z": 9}}) and not paths({"c": {"q": 2}})
    assert compile_args({"q": 1}, "ignore") is None


# ------------------------------------------------------------------ verdicts
def test_threshold_comes_from_the_entry_then_the_file_then_the_default() -> None:
    """Per-entry threshold beats execution.threshold, which beats 0.8."""
    entry = "name: t\ntype: tool_trajectory\nmode: any_order\nminimums: {a: 1, b: 1}"
    events: list[Event] = [call("a"), end()]
    assert not final_of(agentv(entry), events).passed
    assert final_of(agentv(entry, threshold=0.5), events).passed
    assert not final_of(
        agentv(entry + "\nthreshold: 0.6", threshold=0.5), events
    ).passed


def final_of(s: Suite, events: list[Event]) -> Verdict:
    (v,) = finals(s, events).values()
    return v


def test_cli_threshold_reaches_the_grader() -> None:
    """BuildContext.threshold (--threshold) is the pass mark when the entry has none."""
    gtype = lookup("tool-trajectory")
    grader = gtype.build(
        {"mode": "any_order", "minimums": {"a": 1}},
        name="g",
        context=BuildContext(threshold=0.25),
    )
    assert grader.threshold == 0.25  # type: ignore[attr-defined]


def test_agentv_before_271_ignores_yaml_latency_and_reports_borderline() -> None:
    """Under agentv<2.7.1 max_duration_ms is dropped with a warning and 0.6-0.8 is borderline."""
    s = tt(
        """
        agentv_compat: agentv<2.7.1
        mode: in_order
        expected: [{tool: a, max_duration_ms: 1}, {tool: b}, {tool: c}]
        """
    )
    assert "ignored under agentv_compat agentv<2.7.1" in str(s.warnings[0])
    v = final(s, [call("a", "1"), took("1", 99), call("b"), end()])
    assert math.isclose(v.score, 2 / 3) and v.metadata["verdict"] == "borderline"
    assert (
        "(required ≥1)"
        in final(
            tt("agentv_compat: agentv<2.7.1\nmode: any_order\nminimums: {a: 1}"),
            [call("b"), end()],
        ).evidence
    )


def test_metadata_carries_mode_weight_and_upstream_texts() -> None:
    """Evidence joins the hits on pass; metadata has mode, verdict, aspects and weight."""
    v = final(tt("mode: in_order\nexpected: [{tool: a}]\nweight: 2"), [call("a")])
    assert v.metadata == {
        "mode": "in_order",
        "verdict": "pass",
        "hits": ["Found a at position 0"],
        "misses": [],
        "aspects": 1,
        "weight": 2.0,
    }
    assert v.evidence == "Found a at position 0"


def test_state_survives_a_checkpoint() -> None:
    """The per-trace state round-trips through msgpack (plain data)."""
    state = TrajectoryState(seen=[("a", True)], open={"c1": 0}, marks=[1])
    raw = msgspec.msgpack.encode(state)
    assert msgspec.msgpack.decode(raw, type=TrajectoryState) == state


# ------------------------------------------------------------------ config
def test_upstream_skips_become_config_errors_naming_the_field() -> None:
    """Invalid mode, missing minimums/expected and wrong shapes are errors, not silent skips."""
    cases = {
        "mode: nope\nminimums: {}": "invalid mode 'nope' (must be any_order",
        "mode: any_order": "any_order mode requires minimums",
        "mode: exact": "exact mode requires expected",
        "mode: any_order\nminimums: [a]": "minimums must be an object",
        "mode: in_order\nexpected: {tool: a}": "expected must be an array",
        "mode: exact\nexpected: []\nargs_match: fuzzy": "invalid args_match 'fuzzy'",
        "mode: exact\nexpected: []\nweight: -1": "weight must be a finite number >= 0",
        "mode: exact\nexpected: []\nthreshold: 2": "threshold must be a number between 0 and 1",
        "mode: exact\nexpected: []\nagentv_compat: v3": "agentv_compat must be one of",
    }
    for body, message in cases.items():
        with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
            tt(body)


def test_all_errors_of_an_entry_are_reported_together() -> None:
    """Several problems in one entry come back as ConfigErrors with their fields."""
    with pytest.raises(ConfigErrors, match=r"2 config errors") as info:
        tt("mode: exact\nexpected: []\nweight: x\nthreshold: x")
    fields = [e.location.field for e in info.value.errors]
    assert fields == ["graders[0].config.weight", "graders[0].config.threshold"]


def test_unnamed_agentv_evaluator_is_an_error() -> None:
    """agentv skips an evaluator without a name; trajgrade refuses the file instead."""
    with pytest.raises(ConfigError, match="`name` must be a non-empty string"):
        agentv("type: tool_trajectory\nmode: any_order\nminimums: {a: 1}")


def test_silently_dropped_parts_become_warnings() -> None:
    """Bad minimums, toolless items, odd args and unknown keys are dropped with a warning each."""
    s = tt(
        """
        mode: in_order
        minimums: {a: 1}
        expected:
          - {tool: a, input: {q: 1}, args: [1], max_duration_ms: -5}
          - {name: b}
        args_mach: exact
        """
    )
    text = "\n".join(str(w) for w in s.warnings)
    assert "minimums is ignored in in_order mode" in text
    assert "expected[0].input: `input` is ignored by expected items" in text
    assert "args [1] is neither 'any' nor a mapping" in text
    assert "max_duration_ms -5 is ignored" in text
    assert "expected[1]: this item is dropped" in text
    assert "did you mean `args_match`?" in text
    (grader,) = s.graders
    assert grader.normalized_config == {  # type: ignore[attr-defined]
        "name": "tool_trajectory",
        "mode": "in_order",
        "expected": [{"tool": "a"}],
    }


def test_alias_and_inline_entry_build_the_same_grader() -> None:
    """`tool-trajectory` is an alias, and an agentv entry pasted into graders: works."""
    s = suite("graders:\n  - {type: tool-trajectory, mode: exact, expected: []}\n")
    (grader,) = s.graders
    assert grader.kind == "tool_trajectory"
    assert grader.normalized_config["mode"] == "exact"  # type: ignore[attr-defined]


# ------------------------------------------------------------------ property
_TOOLS = ("a", "b", "c")
_ARGS = st.sampled_from([None, {"q": 1}, {"q": 2}, {"q": 1, "n": 0}])


@st.composite
def _configs(draw: st.DrawFn) -> dict[str, Any]:
    mode = draw(
        st.sampled_from(["any_order", "in_order", "exact", "superset", "subset"])
    )
    cfg: dict[str, Any] = {
        "mode": mode,
        "threshold": draw(st.sampled_from([0, 0.5, 0.8, 1])),
    }
    cfg["args_match"] = draw(st.sampled_from(["exact", "superset", "subset"]))
    if mode == "any_order":
        mins = draw(
            st.dictionaries(st.sampled_from(_TOOLS), st.sampled_from([0, 1, 2, 1.5]))
        )
        cfg["minimums"] = mins
        return cfg
    items = []
    for _ in range(draw(st.integers(0, 3))):
        item: dict[str, Any] = {"tool": draw(st.sampled_from(_TOOLS))}
        if (args := draw(_ARGS)) is not None:
            item["args"] = args
        if mode in ("in_order", "exact") and draw(st.booleans()):
            item["max_duration_ms"] = draw(st.sampled_from([0, 10, 50]))
        items.append(item)
    cfg["expected"] = items
    return cfg


@st.composite
def _traces(draw: st.DrawFn) -> tuple[list[Event], list[tuple[str, Any, Any]], bool]:
    """Events, and the naive view: (name, args, duration) per call, and whether there was output."""
    events: list[Event] = []
    calls: list[tuple[str, Any, Any]] = []
    waiting: list[tuple[str, float | None]] = []
    output = False
    for i in range(draw(st.integers(0, 6))):
        if draw(st.booleans()):
            role = draw(st.sampled_from(["user", "assistant"]))
            events.append(say("m", role))
            output |= role == "assistant"
        args = draw(_ARGS)
        name = draw(st.sampled_from(_TOOLS))
        events.append(ToolCall(trace_id="t", name=name, call_id=f"c{i}", args=args))
        output = True
        returns = draw(st.sampled_from(["now", "later", "never"]))
        ms = draw(st.sampled_from([None, 0.0, 20.0, 60.0]))
        calls.append((name, args, ms if returns != "never" else None))
        if returns == "now":
            events.append(took(f"c{i}", ms))
        elif returns == "later":
            waiting.append((f"c{i}", ms))
    events.extend(took(cid, ms) for cid, ms in reversed(waiting))
    return events, calls, output


def _naive(
    cfg: dict[str, Any], calls: list[tuple[str, Any, Any]], output: bool
) -> tuple[float, int, int]:
    """agentv's whole-trace scoring, written out directly: (score, aspects, hits)."""
    if not output:
        return 0.0, 1, 0
    mode, items = cfg["mode"], cfg.get("expected", [])

    def ok(item: dict[str, Any], args: Any) -> bool:
        want = item.get("args")
        if want is None:
            return True
        if args is None:
            return False
        rule = cfg["args_match"]
        if rule == "exact":
            return bool(want == args)
        if rule == "superset":
            return all(k in args and args[k] == v for k, v in want.items())
        return all(k in want and want[k] == v for k, v in args.items())

    if mode == "any_order":
        mins = cfg["minimums"]
        if not mins:
            return 1.0, 0, 1
        hits = sum(sum(c[0] == t for c in calls) >= m for t, m in mins.items())
        return hits / len(mins), len(mins), hits
    if mode == "superset":
        if not items:
            return 1.0, 0, 1
        used: set[int] = set()
        for item in items:
            for j, (name, args, _) in enumerate(calls):
                if j not in used and name == item["tool"] and ok(item, args):
                    used.add(j)
                    break
        return len(used) / len(items), len(items), len(used)
    if mode == "subset":
        if not items:
            return (0.0, len(calls), 0) if calls else (1.0, 0, 1)
        good = sum(
            any(n == it["tool"] and ok(it, a) for it in items) for n, a, _ in calls
        )
        return (good / len(calls) if calls else 1.0), len(calls), good if calls else 1
    if not items:
        return 1.0, 0, 1
    hits = skips = 0
    j = 0
    for i, item in enumerate(items):
        matched = None
        if mode == "in_order":
            while j < len(calls):
                name, args, ms = calls[j]
                j += 1
                if name == item["tool"]:
                    matched = (args, ms) if ok(item, args) else None
                    break
        elif i < len(calls) and calls[i][0] == item["tool"] and ok(item, calls[i][1]):
            matched = (calls[i][1], calls[i][2])
        if matched is None:
            continue
        hits += 1
        if "max_duration_ms" in item:
            if matched[1] is None:
                skips += 1
            else:
                hits += matched[1] <= item["max_duration_ms"]
    aspects = len(items) + sum("max_duration_ms" in it for it in items) - skips
    return hits / aspects, aspects, hits


@settings(max_examples=400, deadline=None)
@given(cfg=_configs(), trace=_traces())
def test_streamed_verdicts_equal_a_naive_whole_trace_scoring(
    cfg: dict[str, Any], trace: tuple[list[Event], list[tuple[str, Any, Any]], bool]
) -> None:
    """The final verdict has the naive score, and no early verdict ever differs from it."""
    events, calls, output = trace
    s = tt(msgspec.json.encode(cfg).decode())
    out = run(s, [*events, end()])
    (last,) = [v for _, v in out if v.final]
    score, aspects, hits = _naive(cfg, calls, output)
    assert math.isclose(last.score, score) and last.metadata["aspects"] == aspects
    assert len(last.metadata["hits"]) == hits or not output
    assert last.passed is (score >= cfg["threshold"])
    for _, v in out:
        assert v.outcome is last.outcome
