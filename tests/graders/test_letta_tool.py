"""letta-evals tool graders: functions, extractors, per-turn, streaming, custom code."""

from __future__ import annotations

import importlib.metadata
import json
import re
import textwrap
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from trajgrade import BuildContext, Engine, TraceSnapshot, compile_suite, decode_config
from trajgrade.config.compile import load_suite
from trajgrade.config.model import Suite
from trajgrade.errors import ConfigError, ConfigErrors
from trajgrade.events import Event, Message, TraceEnd, TraceStart
from trajgrade.formats.letta import LettaReader
from trajgrade.graders.letta.tool import GradeResult, Sample, grader
from trajgrade.pipeline.whole import grade_bytes
from trajgrade.runner.dataset import load_dataset
from trajgrade.verdicts import Outcome, Verdict

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "letta"


# ------------------------------------------------------------------ helpers
def A(text: Any) -> dict[str, Any]:
    return {"message_type": "assistant_message", "content": text}


def U(text: str) -> dict[str, Any]:
    return {"message_type": "user_message", "content": text}


def CALL(name: str, args: str = "{}", cid: str = "c1") -> dict[str, Any]:
    one = {"name": name, "arguments": args, "tool_call_id": cid}
    return {"message_type": "tool_call_message", "tool_call": one, "tool_calls": [one]}


def RET(cid: str, text: str, status: str = "success") -> dict[str, Any]:
    return {
        "message_type": "tool_return_message",
        "tool_call_id": cid,
        "tool_return": text,
        "status": status,
    }


def suite(metric: dict[str, Any], **context: Any) -> Suite:
    """A letta-evals suite of one metric, compiled with the given BuildContext."""
    text = yaml.safe_dump({"graders": {"m": {"kind": "tool", **metric}}})
    return compile_suite(
        decode_config(text, name="suite.yaml"), context=BuildContext(**context)
    )


def events(trajectory: list[Any]) -> list[Event]:
    """The Letta adapter's events for one trajectory (trace id ``t``)."""
    buf = (json.dumps(trajectory) + "\n").encode()
    evs, errors, _ = LettaReader(source="t", default_trace="t").feed(buf, 1)
    assert not errors, errors
    return evs


def stream(
    metric: dict[str, Any] | Suite,
    trajectory: list[Any],
    sample: dict[str, Any] | None = None,
) -> list[tuple[int, Verdict]]:
    """(index of the event after which it came, verdict); len(events) = at the end."""
    s = metric if isinstance(metric, Suite) else suite(metric)
    evs = events(trajectory)
    engine = Engine(s, samples=None if sample is None else {"t": sample})
    out = [(i, v) for i, ev in enumerate(evs) for v in engine.feed(ev)]
    return out + [(len(evs), v) for v in engine.finish()]


def final(
    metric: dict[str, Any] | Suite,
    trajectory: list[Any],
    sample: dict[str, Any] | None = None,
) -> Verdict:
    (v,) = [v for _, v in stream(metric, trajectory, sample) if v.final]
    return v


GT = {"id": 1, "input": "q"}


# ------------------------------------------------------------------ functions
def test_exact_match_strips_both_sides_but_reports_the_raw_submission() -> None:
    """exact_match compares str.strip()ped texts; the submission is kept as extracted."""
    v = final(
        {"function": "exact_match"}, [[A("\n 42 \t")]], {**GT, "ground_truth": "42 "}
    )
    assert v.outcome is Outcome.PASS and v.score == 1.0
    assert v.evidence == "Exact match: True"
    assert v.metadata["submission"] == "\n 42 \t"
    assert v.metadata["extraction_time"] == 0.0


def test_contains_is_case_insensitive_and_missing_truth_fails() -> None:
    """contains lowercases both sides; no ground_truth gives upstream's rationale."""
    assert final(
        {"function": "contains"}, [[A("PARIS!")]], {**GT, "ground_truth": "paris"}
    ).passed
    v = final({"function": "contains"}, [[A("x")]], GT)
    assert v.outcome is Outcome.FAIL and v.evidence == "No ground_truth answer provided"


def test_regex_match_reports_python_re_errors() -> None:
    """An invalid pattern scores 0 with re.error's text, as letta-evals does."""
    v = final({"function": "regex_match"}, [[A("x")]], {**GT, "ground_truth": "(a"})
    assert v.evidence == (
        "Invalid regex pattern: missing ), unterminated subpattern at position 0"
    )
    v = final({"function": "regex_match"}, [[A("x")]], GT)
    assert v.evidence == "No ground_truth regex pattern provided"


def test_regex_match_timeout_is_an_error_verdict() -> None:
    """A catastrophic ground-truth pattern is abandoned: an error, not a fail."""
    s = suite({"function": "regex_match"}, regex_timeout=0.01)
    v = final(s, [[A("a" * 50_000 + "!")]], {**GT, "ground_truth": "(a+)+$"})
    assert v.outcome is Outcome.ERROR
    assert "the sample's ground_truth ran longer than 0.01s" in v.evidence


def test_ascii_printable_only_lists_five_offenders_sorted() -> None:
    """Offenders are unique, sorted by code point, repr()-quoted, at most five."""
    v = final({"function": "ascii_printable_only"}, [[A("\tü\x00éàñ😀\r\n")]], GT)
    assert v.evidence == (
        "Found non-printable ASCII characters: '\\x00', '\\t', 'à', 'é', 'ñ' (+2 more)"
    )


# ------------------------------------------------------------------ pipeline
def test_empty_trajectory_and_empty_submission_skip_the_function() -> None:
    """No messages, or nothing extracted: score 0 with upstream's rationale, no call."""
    v = final({"function": "ascii_printable_only"}, [[], []], GT)
    assert v.evidence == "Empty trajectory - agent produced no messages"
    assert v.metadata == {"submission": "", "rationale": v.evidence}
    v = final({"function": "ascii_printable_only"}, [[U("hi")]], GT)
    assert v.evidence == "Empty submission - extractor found no content"


def test_tool_arguments_is_the_raw_json_text_or_braces() -> None:
    """tool_arguments returns the arguments string verbatim; "{}" when no call matched."""
    metric = {
        "function": "exact_match",
        "extractor": "tool_arguments",
        "extractor_config": {"tool_name": "search"},
    }
    v = final(
        metric, [[CALL("search", '{"q":  "x"}')]], {**GT, "ground_truth": '{"q": "x"}'}
    )
    assert v.outcome is Outcome.FAIL and v.metadata["submission"] == '{"q":  "x"}'
    v = final(metric, [[A("no call")]], {**GT, "ground_truth": "{}"})
    assert v.passed and v.metadata["submission"] == "{}"


def test_pattern_search_all_indexes_the_group_tuple() -> None:
    """With search_all and two groups, `group` indexes each findall tuple 0-based."""
    metric = {
        "function": "exact_match",
        "extractor": "pattern",
        "extractor_config": {"pattern": r"(\w)=(\d)", "group": 1, "search_all": True},
    }
    v = final(metric, [[A("a=1 b=2")]], {**GT, "ground_truth": "1 2"})
    assert v.passed


def test_pattern_timeout_counts_only_if_no_later_message_matched() -> None:
    """Upstream scans last to first: a later match means the slow message is never read."""
    metric = {
        "function": "ascii_printable_only",
        "extractor": "pattern",
        "extractor_config": {"pattern": r"(a+)+$|ok"},
    }
    s = suite(metric, regex_timeout=0.01)
    slow = "a" * 50_000 + "!"
    assert final(s, [[A(slow), A("ok")]], GT).metadata["submission"] == "ok"
    v = final(s, [[A("ok"), A(slow)]], GT)
    assert v.outcome is Outcome.ERROR and "ran longer than" in v.evidence


def test_memory_block_prefers_the_trace_agent_state() -> None:
    """A result row's own agent_state wins over the dataset row's; none is an error."""
    metric = {
        "function": "contains",
        "extractor": "memory_block",
        "extractor_config": {"block_label": "human"},
    }
    row = {
        "sample_id": "t",
        "trajectory": [[A("noted")]],
        "agent_state": {"blocks": [{"label": "human", "value": "Name: Sarah"}]},
    }
    stale = {**GT, "ground_truth": "sarah", "agent_state": {"blocks": []}}
    r = grade_bytes(suite(metric), json.dumps(row).encode(), samples={"t": stale})
    (v,) = r.verdicts
    assert v.passed and v.metadata["submission"] == "Name: Sarah"
    v = final(metric, [[A("noted")]], {**GT, "ground_truth": "x"})
    assert v.outcome is Outcome.ERROR
    assert v.evidence.startswith(
        "memory_block extractor requires agent_state, but it was not retrieved"
    )


def test_display_name_and_pass_threshold_extension() -> None:
    """pass_threshold (trajgrade extension) moves the pass line; display_name is kept."""
    metric = {
        "function": "contains",
        "extractor": "all_assistant",
        "display_name": "Has",
    }
    v = final(
        {**metric, "pass_threshold": 0.5}, [[A("a")]], {**GT, "ground_truth": "a"}
    )
    assert v.passed and v.metadata["display_name"] == "Has"
    with pytest.raises(ConfigError, match=r"pass_threshold.*<= 1.0"):
        suite({**metric, "pass_threshold": 2})


# ------------------------------------------------------------------ samples, per-turn
@pytest.mark.parametrize(
    ("row", "text"),
    [
        (
            {"input": "q", "ground_truth": ["a"]},
            "ground_truth cannot be a list when input is a string",
        ),
        (
            {"input": ["q1", "q2"], "ground_truth": ["a"]},
            "input has 2 items but ground_truth has 1 items. For per-turn evaluation",
        ),
        (
            {"input": "q", "ground_truth": 4},
            "ground_truth must be a string or a list of strings (got int 4)",
        ),
    ],
)
def test_invalid_sample_is_an_error_verdict_for_its_trace(
    row: dict[str, Any], text: str
) -> None:
    """letta's Sample validation errors concern one trace: its verdict is `error`, at once."""
    ((i, v),) = stream({"function": "contains"}, [[A("a")]], row)
    assert i == 0 and v.early and v.outcome is Outcome.ERROR and text in v.evidence


def test_per_turn_grades_each_turn_against_its_ground_truth() -> None:
    """List input and ground_truth: one grade per turn, mean score, upstream's summary."""
    v = final(
        {"function": "contains"},
        [[U("q1"), A("Alpha")], [U("q2"), A("nothing")]],
        {"input": ["q1", "q2", "q3"], "ground_truth": ["alpha", "beta", "gamma"]},
    )
    assert v.score == pytest.approx(1 / 3) and v.outcome is Outcome.FAIL
    assert v.evidence == "1/3 passed: ✓ ✗ ✗"
    assert v.metadata["per_turn_scores"] == [1.0, 0.0, 0.0]
    assert v.metadata["turns_passed"] == 1 and v.metadata["turns_total"] == 3
    assert v.metadata["submission"] == "[Turn 0] Alpha | [Turn 1] nothing | [Turn 2] "
    assert v.metadata["per_turn_grades"][2]["rationale"].startswith("Empty trajectory")


def test_per_turn_verdict_is_final_when_the_last_graded_turn_closes() -> None:
    """Turns past the ground truths are never graded, so the next turn_start decides."""
    trajectory = [[A("a")], [A("b")], [A("ignored")]]
    sample = {"input": ["1", "2"], "ground_truth": ["a", "b"]}
    ((i, v),) = stream({"function": "exact_match"}, trajectory, sample)
    kinds = [type(e).__name__ for e in events(trajectory)]
    assert kinds[i] == "TurnStart" and i == 4 and v.early and v.passed


def test_a_late_per_turn_sample_is_an_error() -> None:
    """A row asking for per-turn grading after messages were graded whole is refused."""
    s = suite({"function": "contains"})
    engine = Engine(s)
    engine.feed(Message(trace_id="t", role="assistant", text="a"))
    (v,) = engine.feed(
        TraceStart(
            trace_id="t", metadata={"sample": {"input": ["q"], "ground_truth": ["a"]}}
        )
    )
    assert (
        v.outcome is Outcome.ERROR
        and "arrived after the trace's first event" in v.evidence
    )


# ------------------------------------------------------------------ streaming
def test_first_assistant_decides_at_the_first_assistant_message() -> None:
    """first_assistant is final at its find, once the sample is known."""
    metric = {"function": "exact_match", "extractor": "first_assistant"}
    ((i, v),) = stream(
        metric, [[U("q"), A("yes"), A("no")]], {**GT, "ground_truth": "yes"}
    )
    assert i == 2 and v.early and v.passed


def test_tool_output_decides_when_the_matching_return_arrives() -> None:
    """tool_output is final at the return of the first matching call."""
    metric = {
        "function": "exact_match",
        "extractor": "tool_output",
        "extractor_config": {"tool_name": "search"},
    }
    trajectory = [[CALL("search"), A("..."), RET("c1", "r1", "error"), RET("c1", "r2")]]
    ((i, v),) = stream(metric, trajectory, {**GT, "ground_truth": "r1"})
    assert i == 3 and v.passed


def test_no_early_verdict_before_the_sample_is_known() -> None:
    """Without a row, first_assistant waits; a log trace_start carrying it decides at once."""
    s = suite({"function": "exact_match", "extractor": "first_assistant"})
    engine = Engine(s)
    assert engine.feed(Message(trace_id="t", role="assistant", text="yes")) == []
    (v,) = engine.feed(
        TraceStart(
            trace_id="t", metadata={"sample": {"input": "q", "ground_truth": "yes"}}
        )
    )
    assert v.early and v.passed
    assert engine.feed(TraceEnd(trace_id="t")) == []


def test_last_assistant_waits_for_the_end_of_the_trace() -> None:
    """A later message may replace the submission, so last_assistant decides at the end."""
    trajectory = [[A("a")], [A("b")]]
    out = stream({"function": "contains"}, trajectory, {**GT, "ground_truth": "b"})
    ((i, v),) = out
    assert i == len(events(trajectory)) - 1 and not v.early and v.passed


def test_state_survives_a_checkpoint_mid_trace() -> None:
    """Grader state is plain data: snapshot, restore into a new engine, same verdict."""
    s = suite({"function": "contains", "extractor": "last_turn"})
    evs = events([[A("x")], [A("a"), A("b")]])
    engine = Engine(s, samples={"t": {**GT, "ground_truth": "A\nB"}})
    engine.feed_all(evs[:4])
    wire = msgspec.msgpack.encode(engine.snapshot())
    restored = Engine(s)
    restored.restore(msgspec.msgpack.decode(wire, type=list[TraceSnapshot]))
    (v,) = restored.feed_all(evs[4:])
    assert v.passed and v.metadata["submission"] == "a\nb"


# ------------------------------------------------------------------ config
def test_unknown_key_is_rejected_like_upstream_extra_forbid() -> None:
    """ToolGraderSpec forbids extra keys; so does letta-tool (with a suggestion)."""
    with pytest.raises(
        ConfigError,
        match=r"graders\.m\.extractr: unknown field `extractr`; did you mean `extractor`\?",
    ):
        suite({"function": "contains", "extractr": "last_turn"})


def test_extractor_options_are_checked_when_the_suite_compiles() -> None:
    """Missing required keys and impossible groups are config errors at their key."""
    with pytest.raises(ConfigErrors) as caught:
        compile_suite(
            decode_config(
                textwrap.dedent(
                    """\
                    graders:
                      a: {kind: tool, function: contains, extractor: tool_output}
                      b: {kind: tool, function: contains, extractor: pattern,
                          extractor_config: {pattern: "(x)", group: 2}}
                      c: {kind: tool, function: contains, extractor: memory_block}
                    """
                ),
                name="s.yaml",
            )
        )
    text = str(caught.value)
    assert (
        "graders.a.extractor_config.tool_name: missing required key `tool_name`" in text
    )
    assert "graders.b.extractor_config.group: group 2 does not exist" in text
    assert (
        "graders.c.extractor_config.block_label: memory_block extractor requires 'block_label'"
        in text
    )


def test_keys_an_extractor_ignores_are_warnings() -> None:
    """A misspelt option is reported, but the suite still compiles (upstream ignores it)."""
    s = suite(
        {
            "function": "contains",
            "extractor": "all_assistant",
            "extractor_config": {"seperator": "|"},
        }
    )
    (w,) = s.warnings
    assert "extractor_config.seperator" in str(w) and "reads separator" in str(w)


def test_unknown_names_list_the_built_ins() -> None:
    """Unknown function and extractor names say what exists and how to add code."""
    with pytest.raises(
        ConfigErrors,
        match=r"(?s)Unknown extractor: nope; built-in extractors: last_assistant.*Grader function 'gone' not found in registry; built-in functions: exact_match",
    ):
        suite({"function": "gone", "extractor": "nope"})


# ------------------------------------------------------------------ custom code
def test_code_in_a_file_needs_allow_code() -> None:
    """path.py:func is refused without --allow-code, naming the fix."""
    with pytest.raises(
        ConfigError,
        match=r"graders\.json_ok\.function: .*pass --allow-code \(in Python, BuildContext\(allow_code=True\)\) to run code named in the config, or register it as a `trajgrade\.letta_functions` entry point",
    ):
        load_suite(FIXTURES / "suite.yaml")


def test_code_in_a_file_runs_with_allow_code() -> None:
    """With allow_code the fixture's grader and extractor run on the fixture traces."""
    s = load_suite(FIXTURES / "suite.yaml", context=BuildContext(allow_code=True))
    samples = load_dataset(FIXTURES / "dataset.jsonl")
    r = grade_bytes(s, (FIXTURES / "trajectories.jsonl").read_bytes(), samples=samples)
    got = {(v.trace_id, v.grader): v for v in r.verdicts}
    assert got["run-1", "json_ok"].passed
    assert got["run-1", "json_ok"].metadata["keys"] == ["city"]
    assert got["run-2", "json_ok"].evidence.startswith("Invalid JSON")
    assert got["run-1", "tools_used"].metadata["submission"] == "search"
    assert got["run-2", "tools_used"].evidence.startswith("Empty submission")


def _fixture_metric(function: str, **more: Any) -> Suite:
    return suite(
        {"function": f"custom_graders.py:{function}", **more},
        allow_code=True,
        base_dir=str(FIXTURES),
    )


def test_custom_extractor_may_read_agent_state_attributes() -> None:
    """Three-parameter extractors get the agent state with attribute access."""
    s = _fixture_metric("valid_json_with_field", extractor="custom_graders.py:persona")
    state = {"blocks": [{"label": "persona", "value": '{"calm": true}'}]}
    v = final(s, [[A("x")]], {**GT, "ground_truth": "calm", "agent_state": state})
    assert v.passed


def test_custom_function_results_and_failures() -> None:
    """A dict result is accepted; a raising function is an error verdict, never a pass."""
    v = final(_fixture_metric("half_credit", pass_threshold=0.5), [[A("a")]], GT)
    assert v.passed and v.score == 0.5 and v.evidence == "half for 'a'"
    v = final(_fixture_metric("explodes"), [[A("abc")]], GT)
    assert v.outcome is Outcome.ERROR
    assert (
        v.evidence
        == "grader function custom_graders.py:explodes raised ZeroDivisionError: 3"
    )


def test_undecorated_and_missing_objects_are_refused() -> None:
    """Loaded objects need the @grader marker; missing names list what exists."""
    with pytest.raises(ConfigError, match=r"is not a valid @grader decorated function"):
        _fixture_metric("not_decorated")
    with pytest.raises(ConfigError, match=r"has no attribute 'nothing'\. Available: "):
        _fixture_metric("nothing")
    with pytest.raises(ConfigError, match=r"File must be a Python file \(\.py\)"):
        suite({"function": "suite.yaml:x"}, allow_code=True, base_dir=str(FIXTURES))


def test_grader_decorator_checks_the_signature_like_upstream() -> None:
    """Wrong arity, names, return annotation or async raise TypeError at decoration."""
    with pytest.raises(
        TypeError,
        match=r"must have exactly 2 parameters \(sample: Sample, submission: str\), got 1",
    ):
        grader(lambda sample: None)
    with pytest.raises(
        TypeError,
        match=r"must have parameters named 'sample' and 'submission', got \['s', 'x'\]",
    ):
        grader(lambda s, x: None)

    async def later(sample: Sample, submission: str) -> GradeResult:
        return GradeResult(score=1.0)

    with pytest.raises(
        TypeError, match=r"is async; trajgrade runs grading functions synchronously"
    ):
        grader(later)
    with pytest.raises(ValueError, match=r"Score must be between 0.0 and 1.0, got 1.5"):
        GradeResult(score=1.5)


def test_entry_point_functions_are_found_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `trajgrade.letta_functions` entry point is loaded when the name is not built in."""
    (tmp_path / "shouty.py").write_text(
        textwrap.dedent(
            """\
            from trajgrade.graders.letta.tool import GradeResult, grader

            @grader
            def shouting(sample, submission) -> GradeResult:
                return GradeResult(score=float(submission.isupper()), rationale="caps")
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    ep = importlib.metadata.EntryPoint(
        name="shouting", value="shouty:shouting", group="trajgrade.letta_functions"
    )
    real = importlib.metadata.entry_points

    def fake(**kw: Any) -> Any:
        return [ep] if kw.get("group") == ep.group else real(**kw)

    monkeypatch.setattr(importlib.metadata, "entry_points", fake)
    assert final({"function": "shouting"}, [[A("HEY")]], GT).passed


# ------------------------------------------------------------------ property
# A whole-trace reference written from letta-evals' code (extractors/builtin.py,
# graders/builtin.py, graders/base.py, execution/grading.py), applied to the
# Letta JSON itself, against the streaming grader fed event by event.
EMPTY_T = "Empty trajectory - agent produced no messages"
EMPTY_S = "Empty submission - extractor found no content"


def _flat(content: Any) -> str:
    return content if isinstance(content, str) else " ".join(p["text"] for p in content)


def _texts(turns: list[list[dict[str, Any]]]) -> list[str]:
    return [
        _flat(m["content"])
        for t in turns
        for m in t
        if m["message_type"] == "assistant_message"
    ]


def _calls(m: dict[str, Any]) -> list[dict[str, Any]]:
    return m.get("tool_calls") or ([m["tool_call"]] if m.get("tool_call") else [])


def ref_extract(name: str, cfg: dict[str, Any], traj: list[Any], state: Any) -> str:
    texts = _texts(traj)
    if name == "last_assistant":
        return texts[-1] if texts else ""
    if name == "first_assistant":
        return texts[0] if texts else ""
    if name == "all_assistant":
        return cfg.get("separator", "\n").join(texts)
    if name == "last_turn":
        return cfg.get("separator", "\n").join(_texts(traj[-1:]))
    if name == "pattern":
        for text in reversed(texts):
            if cfg.get("search_all"):
                found = re.findall(cfg["pattern"], text)
                if found:
                    if isinstance(found[0], tuple):
                        return " ".join(f[cfg.get("group", 0)] for f in found)
                    return " ".join(found)
            elif m := re.search(cfg["pattern"], text):
                return m.group(cfg.get("group", 0)) or ""
        return ""
    messages = [m for t in traj for m in t]
    calls = [
        c
        for m in messages
        if m["message_type"] == "tool_call_message"
        for c in _calls(m)
    ]
    matching = [c for c in calls if c["name"] == cfg.get("tool_name")]
    if name == "tool_arguments":
        return matching[0]["arguments"] if matching else "{}"
    if name == "tool_output":
        returns = [
            m["tool_return"]
            for m in messages
            if m["message_type"] == "tool_return_message"
            and matching
            and m["tool_call_id"] == matching[0]["tool_call_id"]
        ]
        return returns[0] if returns else ""
    if name == "after_marker":
        for text in reversed(texts):
            if (i := text.find(cfg["marker"])) >= 0:
                return text[i + len(cfg["marker"]) :].strip()
        return ""
    if state is None:
        raise RuntimeError("memory_block extractor requires agent_state")
    return next(
        (b["value"] for b in state["blocks"] if b["label"] == cfg["block_label"]), ""
    )


def ref_function(name: str, truth: str | None, sub: str) -> tuple[float, str]:
    if name == "ascii_printable_only":
        bad = sorted(
            {c for c in sub.replace("\n", "").replace("\r", "") if not " " <= c <= "~"}
        )
        if bad:
            more = f" (+{len(bad) - 5} more)" if len(bad) > 5 else ""
            return 0.0, "Found non-printable ASCII characters: " + ", ".join(
                map(repr, bad[:5])
            ) + more
        return 1.0, "All characters printable ASCII (ignoring newlines)"
    if not truth:
        kind = "regex pattern" if name == "regex_match" else "answer"
        return 0.0, f"No ground_truth {kind} provided"
    if name == "exact_match":
        ok = sub.strip() == truth.strip()
        return float(ok), f"Exact match: {ok}"
    if name == "contains":
        ok = truth.lower() in sub.lower()
        return float(ok), f"Contains ground_truth: {ok}"
    try:
        ok = re.search(truth, sub) is not None
    except re.error as e:
        return 0.0, f"Invalid regex pattern: {e}"
    return float(ok), f"Regex match: {ok}"


def ref_grade(
    metric: dict[str, Any], truth: Any, traj: list[Any], state: Any
) -> tuple[float, str, str]:
    if not traj or not any(traj):
        return 0.0, EMPTY_T, ""
    sub = ref_extract(metric["extractor"], metric["extractor_config"], traj, state)
    if not sub:
        return 0.0, EMPTY_S, ""
    score, rationale = ref_function(metric["function"], truth, sub)
    return score, rationale, sub


def reference(
    metric: dict[str, Any], sample: dict[str, Any], traj: list[Any]
) -> tuple[float, str, str]:
    state, truth = sample.get("agent_state"), sample.get("ground_truth")
    if not isinstance(truth, list):
        return ref_grade(metric, truth, traj, state)
    turns = [ref_grade(metric, t, traj[i : i + 1], state) for i, t in enumerate(truth)]
    scores = [g[0] for g in turns]
    marks = " ".join("✓" if x >= 1.0 else "✗" for x in scores)
    passed = sum(x >= 1.0 for x in scores)
    return (
        sum(scores) / len(scores) if scores else 0.0,
        f"{passed}/{len(scores)} passed: {marks}",
        " | ".join(f"[Turn {i}] {g[2]}" for i, g in enumerate(turns)),
    )


_WORDS = ["", "hello", "ANSWER: 42", "a=1 b=22", "x\ty", "ok", "héllo", "Name: Sarah"]
_TRUTHS = [
    None,
    "",
    "42",
    "hello",
    "a=1",
    r"\d+",
    "(",
    "{}",
    '{"q": "x"}',
    "r1",
    "ok",
    "sarah",
]
_EXTRACTORS = {
    "last_assistant": {},
    "first_assistant": {},
    "all_assistant": {"separator": " | "},
    "last_turn": {},
    "pattern": {"pattern": r"(\w)=(\d+)", "group": 1, "search_all": True},
    "tool_arguments": {"tool_name": "search"},
    "tool_output": {"tool_name": "search"},
    "after_marker": {"marker": "ANSWER:"},
    "memory_block": {"block_label": "human"},
}


@st.composite
def trajectories(draw: st.DrawFn) -> list[list[dict[str, Any]]]:
    """Turns of Letta messages; every tool return follows a call (or names none)."""
    ids: list[str] = []
    turns = []
    for _ in range(draw(st.integers(0, 3))):
        turn = []
        for _ in range(draw(st.integers(0, 4))):
            kind = draw(
                st.sampled_from(
                    ["user", "assistant", "assistant", "call", "return", "reasoning"]
                )
            )
            if kind == "assistant":
                text = draw(st.sampled_from(_WORDS))
                parts = [{"type": "text", "text": w} for w in text.split(" ")]
                turn.append(A(parts if draw(st.booleans()) else text))
            elif kind == "call":
                names = draw(
                    st.lists(
                        st.sampled_from(["search", "calc"]), min_size=1, max_size=2
                    )
                )
                calls = []
                for name in names:
                    ids.append(f"c{len(ids)}")
                    args = draw(st.sampled_from(["{}", '{"q": "x"}', '{"q":"x"}']))
                    calls.append(
                        {"name": name, "arguments": args, "tool_call_id": ids[-1]}
                    )
                listed = draw(st.booleans()) or len(calls) > 1
                turn.append(
                    {
                        "message_type": "tool_call_message",
                        "tool_call": calls[0],
                        "tool_calls": calls if listed else [],
                    }
                )
            elif kind == "return":
                cid = draw(st.sampled_from([*ids, "zz"]))
                turn.append(
                    RET(
                        cid,
                        draw(st.sampled_from(["r1", "r2", ""])),
                        draw(st.sampled_from(["success", "error"])),
                    )
                )
            elif kind == "user":
                turn.append(U("q"))
            else:
                turn.append({"message_type": "reasoning_message", "reasoning": "hm"})
        turns.append(turn)
    return turns


@st.composite
def samples(draw: st.DrawFn) -> dict[str, Any]:
    truth = st.sampled_from(_TRUTHS)
    if draw(st.booleans()):
        sample: dict[str, Any] = {"input": "q"}
        if (t := draw(truth)) is not None:
            sample["ground_truth"] = t
    else:
        n = draw(st.integers(0, 3))
        sample = {
            "input": ["q"] * n,
            "ground_truth": [draw(truth.filter(bool)) for _ in range(n)],
        }
    if draw(st.booleans()):
        sample["agent_state"] = {
            "blocks": [{"label": "human", "value": draw(st.sampled_from(_WORDS))}]
        }
    return sample


@settings(max_examples=400, deadline=None)
@given(
    traj=trajectories(),
    sample=samples(),
    extractor=st.sampled_from(sorted(_EXTRACTORS)),
    function=st.sampled_from(
        ["exact_match", "contains", "regex_match", "ascii_printable_only"]
    ),
)
def test_streaming_equals_the_whole_trace_reference(
    traj: list[Any], sample: dict[str, Any], extractor: str, function: str
) -> None:
    """Fed event by event, the grader's verdict is the reference's on the whole trace,
    and a verdict given early is exactly the one the grader gives at the end."""
    metric = {
        "function": function,
        "extractor": extractor,
        "extractor_config": _EXTRACTORS[extractor],
    }
    s = suite(metric)
    try:
        want: tuple[float, str, str] | None = reference(metric, sample, traj)
    except RuntimeError:
        want = None  # memory_block without agent_state
    v = final(s, traj, sample)
    if want is None:
        assert v.outcome is Outcome.ERROR and "requires agent_state" in v.evidence
        return
    score, rationale, submission = want
    assert (v.score, v.evidence, v.metadata["submission"]) == (
        pytest.approx(score),
        rationale,
        submission,
    )
    assert v.passed is (score >= 1.0)
    # Early == end: keep stepping past the first decision, then finish.
    (g,) = s.graders
    state = g.start()
    first = g.step(state, TraceStart(trace_id="t", metadata={"sample": sample}))
    for ev in events(traj):
        d = g.step(state, ev)
        first = first or d
    if first is not None:
        assert v.early
        assert first == g.finish(state)


def test_cli_runs_a_letta_suite_with_dataset_and_allow_code(run_cli: Any) -> None:
    """`trajgrade grade --dataset … --allow-code` on the fixture suite, end to end."""
    args = ["grade", "-c", FIXTURES / "suite.yaml", FIXTURES / "trajectories.jsonl"]
    args += ["--dataset", FIXTURES / "dataset.jsonl", "--output", "jsonl", "-q"]
    refused = run_cli(*args)
    assert refused.returncode == 2 and "pass --allow-code" in refused.stderr
    proc = run_cli(*args, "--allow-code")
    verdicts = [json.loads(line) for line in proc.stdout.splitlines()]
    assert proc.returncode == 1  # run-2 fails
    assert {(v["trace_id"], v["grader"], v["outcome"]) for v in verdicts} == {
        ("run-1", "json_ok", "pass"),
        ("run-1", "tools_used", "pass"),
        ("run-2", "json_ok", "fail"),
        ("run-2", "tools_used", "fail"),
    }
