"""vally tool-calls: streaming decisions, evidence, and config errors."""

from __future__ import annotations

import pytest
from tests._support import call, end, finals, one, result, run, turn

from trajgrade.errors import ConfigError, ConfigErrors
from trajgrade.verdicts import Outcome


def test_disallowed_call_fails_at_call_time() -> None:
    """A disallowed call without a result filter fails the trace at its tool_call."""
    s = one("tool-calls", "required: [bash]\ndisallowed: ['^rm_rf$']")
    out = run(
        s, [call("bash", "1"), call("rm_rf", "2"), result("1"), result("2"), end()]
    )
    ((idx, v),) = out
    assert idx == 1 and v.final and v.early and v.outcome is Outcome.FAIL
    assert v.evidence == "disallowed[0] matched 'rm_rf' in call 2"
    assert v.matched is not None and v.matched.rule == "disallowed[0]"


def test_disallowed_with_result_filter_waits_for_the_result() -> None:
    """A disallowed entry with `result` fails when a matching result arrives, not before."""
    s = one("tool-calls", "disallowed: [{name: bash, result: 'Permission denied'}]")
    out = run(
        s,
        [
            call("bash", "1", command="cat x"),
            result("1", "ok"),
            call("bash", "2"),
            result("2", "cat: Permission denied"),
        ],
    )
    ((idx, v),) = out
    assert idx == 3 and v.outcome is Outcome.FAIL


def test_required_passes_early_without_disallowed_or_final() -> None:
    """With only required entries, the verdict is final as soon as the last count is met."""
    s = one("tool-calls", "required: [{name: upload, min_count: 2}]")
    out = run(
        s,
        [
            call("upload", "1"),
            result("1"),
            call("upload", "2"),
            result("2"),
            call("x", "3"),
        ],
    )
    ((idx, v),) = out
    assert idx == 3 and v.early and v.outcome is Outcome.PASS


def test_required_counts_only_completed_calls() -> None:
    """A matching call whose result never arrives does not satisfy `required`."""
    s = one("tool-calls", "required: [create]")
    v = finals(s, [call("create", "1"), end()])[("t", "tool-calls")]
    assert (
        v.outcome is Outcome.FAIL and "0 of 1 matching completed call(s)" in v.evidence
    )


def test_cannot_pass_early_while_disallowed_entries_exist() -> None:
    """A later disallowed call could still fail the trace, so no early pass."""
    s = one("tool-calls", "required: [create]\ndisallowed: [delete]")
    out = run(s, [call("create", "1"), result("1"), call("delete", "2"), end()])
    ((_, v),) = out
    assert v.outcome is Outcome.FAIL


def test_at_step_window_closing_fails_early() -> None:
    """When step N ends without the call, an at_step: N entry fails at the next turn_start."""
    s = one(
        "tool-calls",
        "required: [{name: validate, at_step: 0}]\ndisallowed: [nothing_matches_this]",
    )
    out = run(
        s,
        [
            turn(),
            call("view", "1"),
            result("1"),
            turn(),
            call("validate", "2"),
            result("2"),
            end(),
        ],
    )
    ((idx, v),) = out
    assert idx == 3 and v.early and v.outcome is Outcome.FAIL
    assert "window in step 0 closed at step 1" in v.evidence


def test_window_waits_for_a_pending_candidate() -> None:
    """A matching call in the window whose result arrives in the next step still counts."""
    s = one("tool-calls", "required: [{name: build, at_step: 0}]")
    out = run(s, [turn(), call("build", "b1"), turn(), result("b1"), end()])
    ((_, v),) = out
    assert v.outcome is Outcome.PASS


def test_final_requires_the_last_call_to_match_and_complete() -> None:
    """`final: true` is broken by any later call, even one without a result."""
    s = one("tool-calls", "required: [{name: report, final: true}]")
    good = finals(
        s, [call("bash", "1"), result("1"), call("report", "2"), result("2"), end()]
    )
    late = finals(s, [call("report", "2"), result("2"), call("bash", "3"), end()])
    assert good[("t", "tool-calls")].passed
    assert not late[("t", "tool-calls")].passed
    assert "not the final tool call" in late[("t", "tool-calls")].evidence


def test_sequence_matches_at_invocation_time() -> None:
    """Sequence entries count calls that have no result yet."""
    s = one("tool-calls", "sequence: [plan, apply]")
    out = run(s, [call("plan", "1"), call("apply", "2")])
    ((idx, v),) = out
    assert idx == 1 and v.passed and v.early


def test_missing_command_argument_is_a_configuration_error_verdict() -> None:
    """`command` on an entry whose tool call lacks that argument gives an error verdict."""
    s = one("tool-calls", "required: [{name: bash, command: 'npm test'}]")
    ((_, v),) = run(s, [call("bash", "1", script="npm test")])
    assert v.outcome is Outcome.ERROR
    assert "filters on 'command'" in v.evidence and "use args:" in v.evidence


def test_result_without_call_id_pairs_with_oldest_open_call() -> None:
    """A result lacking call_id completes the oldest call still waiting."""
    s = one("tool-calls", "required: [{name: '^a$', result: first}]")
    v = finals(
        s,
        [
            call("a", "1"),
            call("b", "2"),
            result(None, "first"),
            result(None, "second"),
            end(),
        ],
    )
    assert v[("t", "tool-calls")].passed


def test_non_string_results_are_matched_as_compact_json() -> None:
    """Objects are JSON.stringify-ed (compact, integral floats without .0)."""
    s = one(
        "tool-calls", 'required: [{name: q, result: \'^\\{"rows":3,"ok":true\\}$\'}]'
    )
    v = finals(s, [call("q", "1"), result("1", {"rows": 3.0, "ok": True}), end()])
    assert v[("t", "tool-calls")].passed


def test_regex_timeout_becomes_an_error_verdict() -> None:
    """A catastrophic pattern on a large result is abandoned and reported, not hung on."""
    # (A lookahead keeps it off RE2, on the time-boxed backtracking engine.)
    s = one("tool-calls", "required: [{name: x, result: '(a+)+(?=c)'}]")
    ((_, v),) = run(s, [call("x", "1"), result("1", "a" * 200_000 + "b")])
    assert v.outcome is Outcome.ERROR and "ran longer than" in v.evidence


def test_a_catastrophic_pattern_re2_can_run_decides() -> None:
    """(a+)+$ runs on RE2 in linear time: a real verdict, not a timeout."""
    s = one("tool-calls", "required: [{name: x, result: '(a+)+$'}]")
    ((_, v),) = run(s, [call("x", "1"), result("1", "a" * 1_000_000 + "b")])
    assert v.outcome is Outcome.FAIL


def test_metadata_reports_counts_and_cursor() -> None:
    """Metadata carries per-matcher counts and the sequence cursor."""
    s = one("tool-calls", "required: [a]\nsequence: [a, b]")
    v = finals(s, [call("a", "1"), result("1"), end()])[("t", "tool-calls")]
    assert v.metadata["required"] == [
        {"matcher": "required[0]", "count": 1, "min_count": 1}
    ]
    assert v.metadata["sequence"] == {"matched": 1, "length": 2}


@pytest.mark.parametrize(
    ("config", "field", "text"),
    [
        (
            "disallowed: [{name: x, min_count: 2}]",
            "disallowed[0].min_count",
            "only allowed on 'required'",
        ),
        (
            "sequence: [{name: x, final: true}]",
            "sequence[0].final",
            "only allowed on 'required'",
        ),
        (
            "sequence: [{name: x, result: ok}]",
            "sequence[0].result",
            "not supported on 'sequence'",
        ),
        (
            "required: [{name: x, before_step: 0}]",
            "required[0].before_step",
            "must be >= 1",
        ),
        (
            "required: [{name: x, at_step: 3, before_step: 2}]",
            "required[0].at_step",
            "must be less than before_step",
        ),
        (
            "required: [{name: x, min_count: 0}]",
            "required[0].min_count",
            "must be >= 1",
        ),
        ("required: ['a(b']", "required[0].name", "invalid regular expression"),
        (
            "required: [{name: x, args: {q: '[z-a]'}}]",
            "required[0].args.q",
            "invalid regular expression",
        ),
        ("{}", "required", "at least one of required, disallowed or sequence"),
    ],
)
def test_config_errors_name_the_field(config: str, field: str, text: str) -> None:
    """Each documented configuration error is raised at load time with its field path."""
    with pytest.raises(ConfigError, match=text) as info:
        one("tool-calls", config)
    assert f"graders[0].config.{field}" in str(info.value)


def test_all_config_errors_are_reported_together() -> None:
    """Several bad entries give one ConfigErrors listing each of them."""
    with pytest.raises(ConfigErrors) as info:
        one(
            "tool-calls",
            "required: [{name: x, before_step: 0}]\ndisallowed: [{name: y, final: true}]",
        )
    assert len(info.value.errors) == 2
