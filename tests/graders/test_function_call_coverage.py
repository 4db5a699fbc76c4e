"""AI GO! function_call_coverage: outputs, streaming finality, templates, sandbox, config."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests._support import call, end, finals, run, suite

from trajgrade.engine.engine import Engine, TraceSnapshot
from trajgrade.errors import ConfigError
from trajgrade.events import Event, Message, TraceStart
from trajgrade.graders.aigo.function_call_coverage import CoverageState, parse_required
from trajgrade.pipeline.whole import grade_bytes
from trajgrade.verdicts import Outcome, Verdict


def _suite(function_calls: str, mode: str = "any_order", **extra: Any) -> Any:
    entry = {"type": "function_call_coverage", "function_calls": function_calls}
    entry.update(mode=mode, **extra)
    return suite(json.dumps({"scorers": [entry]}))


def _calls(*names: str) -> list[Event]:
    return [call(n, f"c{i}") for i, n in enumerate(names)]


def _final(s: Any, events: list[Event]) -> Verdict:
    return finals(s, events)[("t", "function_call_coverage")]


def _sample(row: Any) -> TraceStart:
    return TraceStart(trace_id="t", metadata={"sample": row})


def test_outputs_follow_the_documented_table() -> None:
    """The four rows of AI GO!'s table give the documented outputs."""
    rows = [
        (("search", "calculator"), "any_order", 1.0, 2, 0),
        (("calculator", "search"), "any_order", 1.0, 2, 0),
        (("calculator", "search"), "in_order", 0.0, 2, 0),
        (("search", "lookup"), "any_order", 0.0, 1, 1),
    ]
    for names, mode, made_all, made, unrequired in rows:
        v = _final(_suite('["search", "calculator"]', mode), [*_calls(*names), end()])
        assert v.metadata["all_required_calls_made"] == made_all
        assert v.metadata["num_required_calls_made"] == made
        assert v.metadata["num_unrequired_calls"] == unrequired
        assert v.score == made_all and v.passed is (made_all == 1.0)


def test_any_order_pass_is_sealed_at_the_completing_call_and_final_at_end() -> None:
    """The outcome is fixed when the last required call arrives; the counts only at the end."""
    s = _suite('["search", "calculator"]')
    out = run(s, [*_calls("calculator", "lookup", "search", "search"), end()])
    (i, sealed), (j, final) = out
    assert (i, sealed.final, sealed.outcome) == (2, False, Outcome.PASS)
    assert sealed.metadata["num_unrequired_calls"] == 1
    assert "so far" in sealed.evidence
    assert (j, final.final, final.outcome) == (4, True, Outcome.PASS)
    assert final.metadata["num_unrequired_calls"] == 2


def test_in_order_is_sealed_when_the_subsequence_completes() -> None:
    """in_order seals at the call that completes the subsequence, not when all names are present."""
    s = _suite('["search", "calculator"]', "in_order")
    out = run(s, [*_calls("calculator", "search", "calculator"), end()])
    (i, sealed), (_, final) = out
    assert i == 2 and not sealed.final and final.passed
    assert (
        final.evidence == "all 2 required call(s) made in order; 1 unrequired call(s)"
    )


def test_a_fail_is_only_decided_at_the_end() -> None:
    """A missing call could still come, so a failing trace gets one verdict, at its end."""
    out = run(_suite('["search", "calculator"]'), [*_calls("search", "x"), end()])
    ((i, v),) = out
    assert i == 2 and v.final and not v.early and v.outcome is Outcome.FAIL
    assert v.evidence == (
        "1 of 2 required call(s) made; not made: 'calculator'; 1 unrequired call(s)"
    )


def test_in_order_fail_names_the_next_expected_call() -> None:
    """When every name is present but out of order, the evidence says where order broke."""
    v = _final(_suite('["a", "b", "c"]', "in_order"), [*_calls("a", "c", "b"), end()])
    assert v.outcome is Outcome.FAIL
    assert "only 2 of 3 in order; next expected 'c'" in v.evidence


def test_duplicate_required_names_need_one_call_each() -> None:
    """The required list is a multiset: ["search", "search"] needs two search calls."""
    s = _suite('["search", "search"]')
    one = _final(s, [*_calls("search"), end()])
    assert one.metadata == {
        "all_required_calls_made": 0.0,
        "required_calls_coverage": 0.5,
        "num_required_calls_made": 1,
        "num_required_calls_not_made": 1,
        "num_unrequired_calls": 0,
        "num_required_calls_total": 2,
    }
    assert "not made: 'search'" in one.evidence
    three = _final(s, [*_calls("search", "search", "search"), end()])
    assert three.passed and three.metadata["num_unrequired_calls"] == 1


def test_empty_list_is_vacuously_satisfied_with_null_coverage() -> None:
    """An empty required list passes and reports coverage as null (0/0)."""
    v = _final(_suite("[]"), [*_calls("search"), end()])
    assert v.passed and v.metadata["required_calls_coverage"] is None
    assert v.metadata["num_unrequired_calls"] == 1
    assert (
        v.evidence == "no calls are required (the list is empty); 1 unrequired call(s)"
    )


def test_names_are_compared_exactly() -> None:
    """Names are case-sensitive and never patterns: "Search" and "s.*" match only themselves."""
    v = _final(_suite('["search", "s.*"]'), [*_calls("Search", "s.*"), end()])
    assert v.metadata["num_required_calls_made"] == 1
    assert v.metadata["num_unrequired_calls"] == 1


def test_template_reads_a_sample_field() -> None:
    """{{ sample.function_calls }} renders the dataset row's list (printed as a Python list)."""
    s = _suite("{{ sample.function_calls }}")
    row = {"function_calls": ["get_weather", "search"]}
    v = _final(s, [_sample(row), *_calls("search", "get_weather"), end()])
    assert v.passed and v.metadata["num_required_calls_total"] == 2


def test_engine_samples_reach_the_template() -> None:
    """A dataset row given to the engine renders the template for its trace only."""
    s = _suite("{{ sample.function_calls }}")
    engine = Engine(s, samples={"t": {"function_calls": ["a"]}})
    verdicts = engine.feed_all([call("a", "1"), end()])
    assert [v.outcome for v in verdicts] == [Outcome.PASS, Outcome.PASS]


def test_derived_expression_template() -> None:
    """A filter pipeline over the sample, as in AI GO!'s docs, gives the list."""
    s = _suite("{{ sample.tools | map(attribute='name') | list }}", "in_order")
    row = {"tools": [{"name": "plan"}, {"name": "act"}]}
    v = _final(s, [_sample(row), *_calls("plan", "act"), end()])
    assert v.passed


def test_a_trace_start_without_sample_leaves_the_list_open() -> None:
    """Only a trace_start carrying metadata.sample fixes the list; others are ignored."""
    s = _suite("{{ sample.need }}")
    start = TraceStart(trace_id="t", metadata={"agent": "x"})
    v = _final(s, [start, _sample({"need": ["a"]}), *_calls("a"), end()])
    assert v.passed


def test_missing_sample_field_is_an_error_verdict_with_a_dataset_hint() -> None:
    """Without a dataset row, a sample template fails loudly instead of requiring nothing."""
    v = _final(_suite("{{ sample.function_calls }}"), [*_calls("a"), end()])
    assert v.outcome is Outcome.ERROR
    assert "'dict object' has no attribute 'function_calls'" in v.evidence
    assert "check --dataset and --dataset-key" in v.evidence


def test_trace_without_calls_still_renders_at_the_end() -> None:
    """A trace with no calls and no sample renders the template when it ends."""
    v = _final(_suite("{{ sample.x }}"), [Message(trace_id="t", role="user"), end()])
    assert v.outcome is Outcome.ERROR and "no attribute 'x'" in v.evidence


def test_rendered_text_that_is_not_a_list_is_an_error_naming_it() -> None:
    """A sample value that renders to something other than a list of names is an error verdict."""
    s = _suite("{{ sample.need }}")
    for row, shown in [({"need": 5}, "'5'"), ({"need": "a, b"}, "'a, b'")]:
        v = _final(s, [_sample(row), *_calls("a"), end()])
        assert v.outcome is Outcome.ERROR
        assert f"function_calls rendered {shown}, which is not a list" in v.evidence


def test_a_generator_output_hints_at_the_list_filter() -> None:
    """map(...) without `| list` renders a generator; the error says what to add."""
    s = _suite("{{ sample.tools | map(attribute='name') }}")
    v = _final(s, [_sample({"tools": [{"name": "a"}]}), end()])
    assert "add `| list` after map(...)" in v.evidence


def test_parse_required_reads_json_and_python_lists() -> None:
    """JSON lists and Python list literals (Jinja's rendering) both parse."""
    assert parse_required(' ["a", "b"] ') == ["a", "b"]
    assert parse_required("['a', \"b's\"]") == ["a", "b's"]
    assert parse_required("[]") == []


@pytest.mark.parametrize(
    "text", ["", "search", "[1, 2]", "('a',)", "{'a'}", "__import__('os')"]
)
def test_parse_required_refuses_other_values(text: str) -> None:
    """Anything but a list of strings is refused, and nothing is evaluated."""
    with pytest.raises(ValueError, match="which is not a list of function names"):
        parse_required(text)


def test_hard_coded_list_that_is_not_a_list_is_a_config_error() -> None:
    """A template without `sample` is rendered once at load time, so its errors are config errors."""
    with pytest.raises(
        ConfigError, match=r"function_calls: function_calls rendered '\[1\]'"
    ):
        _suite("[1]")


def test_template_syntax_error_is_a_config_error() -> None:
    """A broken template is refused at load time, naming the field."""
    with pytest.raises(
        ConfigError, match=r"scorers\[0\]\.function_calls: not a valid Jinja"
    ):
        _suite("{{ sample.function_calls ")


def test_unknown_template_variable_is_a_config_error() -> None:
    """Templates see only `sample`; another name is a typo caught at load time."""
    with pytest.raises(ConfigError, match="uses samples, but only `sample`"):
        _suite("{{ samples.function_calls }}")


def test_sandbox_refuses_attribute_escapes() -> None:
    """Dunder attribute access is refused, at load time or while grading."""
    with pytest.raises(
        ConfigError, match="access to attribute '__class__' of 'str' object is unsafe"
    ):
        _suite("{{ ''.__class__.__mro__ }}")
    s = _suite("{{ sample.__class__.__mro__[1].__subclasses__() }}")
    v = _final(s, [_sample({"a": 1}), end()])
    assert v.outcome is Outcome.ERROR and "is unsafe" in v.evidence


def test_sandbox_refuses_mutating_the_sample() -> None:
    """A template cannot change the dataset row that other graders and traces share."""
    row = {"need": ["a"]}
    s = _suite("{{ sample.need.append('b') or sample.need }}")
    v = _final(s, [_sample(row), end()])
    assert v.outcome is Outcome.ERROR and row == {"need": ["a"]}


def test_aigo_generic_fields_are_accepted_and_key_names_the_grader() -> None:
    """key, purpose, display_name and metrics load; metrics only warn (AI GO! aggregates them)."""
    s = _suite(
        '["a"]',
        key="fcc",
        purpose="qa",
        display_name="Coverage",
        metrics=[{"type": "mean"}],
    )
    assert [g.name for g in s.graders] == ["fcc"]
    (warning,) = s.warnings
    assert "metrics are aggregated per task by AI GO!" in warning.message


def test_trajgrade_layout_works_too() -> None:
    """The same scorer under trajgrade's `graders:` list with `config:`."""
    s = suite(
        """
        graders:
          - type: function_call_coverage
            config: {function_calls: '["a"]', mode: in_order}
        """
    )
    assert _final(s, [*_calls("a"), end()]).passed


@pytest.mark.parametrize(
    ("extra", "text"),
    [
        ({"mode": "random"}, "scorers[0].mode"),
        ({"purpose": "grade"}, "scorers[0].purpose"),
        ({"function_call": "x"}, "did you mean `function_calls`"),
    ],
)
def test_config_validation(extra: dict[str, Any], text: str) -> None:
    """Bad modes, purposes and misspelt keys are config errors naming the field."""
    entry = {"type": "function_call_coverage", "function_calls": "[]", **extra}
    with pytest.raises(ConfigError, match=text.replace("[", r"\[").replace("]", r"\]")):
        suite(json.dumps({"scorers": [entry]}))


def test_state_survives_a_checkpoint_mid_trace() -> None:
    """The rendered list and counters are plain data: restore gives the same verdicts."""
    s = _suite("{{ sample.need }}", "in_order")
    first = Engine(s)
    first.feed_all([_sample({"need": ["a", "b"]}), call("a", "1")])
    blob = msgspec.msgpack.encode(first.snapshot())
    second = Engine(s)
    second.restore(msgspec.msgpack.decode(blob, type=list[TraceSnapshot]))
    (snap,) = second.snapshot()
    raw = snap.states[0]
    assert raw is not None
    state = msgspec.msgpack.decode(raw, type=CoverageState)
    assert state.required == ["a", "b"] and state.cursor == 1
    verdicts = second.feed_all([call("b", "2"), end()])
    assert [v.final for v in verdicts] == [False, True] and verdicts[-1].passed


def test_grades_an_openresponses_log_end_to_end() -> None:
    """A Responses object line, auto-detected, graded against a dataset row."""
    response = {
        "id": "resp_1",
        "object": "response",
        "output": [
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "search",
                "arguments": "{}",
            },
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "ok"}],
            },
        ],
    }
    s = _suite("{{ sample.function_calls }}")
    result = grade_bytes(
        s,
        json.dumps(response).encode() + b"\n",
        samples={"resp_1": {"function_calls": ["search"]}},
    )
    assert [(v.trace_id, v.final, v.outcome) for v in result.verdicts] == [
        ("resp_1", False, Outcome.PASS),
        ("resp_1", True, Outcome.PASS),
    ]


def test_jinja_is_imported_only_for_this_grader() -> None:
    """Compiling and running other graders does not load Jinja."""
    code = textwrap.dedent(
        """
        import sys
        from trajgrade import compile_suite, decode_config
        compile_suite(decode_config("graders: [{type: tool-calls, config: {required: [a]}}]"))
        assert "jinja2" not in sys.modules
        compile_suite(decode_config("scorers: [{type: function_call_coverage, function_calls: '[]'}]"))
        assert "jinja2" in sys.modules
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# ------------------------------------------------------------------ property
def _naive(required: list[str], names: list[str], in_order: bool) -> dict[str, Any]:
    """The six outputs computed from the whole trace at once, independently."""
    pool = list(names)
    made = 0
    for r in required:
        if r in pool:
            pool.remove(r)
            made += 1
    if in_order:
        it = iter(names)
        done = all(any(n == r for n in it) for r in required)
    else:
        done = made == len(required)
    total = len(required)
    return {
        "all_required_calls_made": 1.0 if done else 0.0,
        "required_calls_coverage": made / total if total else None,
        "num_required_calls_made": made,
        "num_required_calls_not_made": total - made,
        "num_unrequired_calls": len(names) - made,
        "num_required_calls_total": total,
    }


_NAMES = st.sampled_from(["a", "b", "c", "d"])


@settings(max_examples=300, deadline=None)
@given(
    required=st.lists(_NAMES, max_size=5),
    names=st.lists(_NAMES, max_size=10),
    in_order=st.booleans(),
    from_sample=st.booleans(),
)
def test_streaming_equals_the_whole_trace_computation(
    required: list[str], names: list[str], in_order: bool, from_sample: bool
) -> None:
    """The final outputs equal a naive whole-trace computation; an early outcome never differs."""
    mode = "in_order" if in_order else "any_order"
    events: list[Event] = _calls(*names)
    if from_sample:
        s = _suite("{{ sample.need }}", mode)
        events.insert(0, _sample({"need": required}))
    else:
        s = _suite(json.dumps(required), mode)
    out = run(s, [*events, end()])
    final = out[-1][1]
    assert final.final and [v.final for _, v in out].count(True) == 1
    assert final.metadata == _naive(required, names, in_order)
    for _, v in out:
        assert v.outcome == final.outcome and v.score == final.score
    if len(out) == 2:
        assert out[0][1].outcome is Outcome.PASS and not out[0][1].final
