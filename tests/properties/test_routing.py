"""The engine equals the plain reference engine, verdict for verdict.

(Also without its guard: ``Engine(guarding=False)`` gives the same verdicts.)

``reference_engine.ReferenceEngine`` gives every event to every grader's
``step``; the real engine routes events by type, pairs calls with results,
batches, and (phase 2 of the speed work) will route by tool name and drop
settled graders (trajgrade/engine/routing.py). Whatever it skips must not show:
ids, outcomes, scores, evidence, metadata, positions and order of the
verdicts, and every guard decision (``Engine.decisions``: the reference puts
every call to every ``judge``), are the same, on random suites of every
streaming grader type with random ``on_fail`` actions over interleaved
traces, fed in random batch sizes. Only what the grader contract allows is
skipped by the reference too: event types a grader does not declare
(``event_types``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_engine import ReferenceEngine
from strategies import TOOLS, streams, suites
from test_guard_rules import _rule

from trajgrade.config.compile import compile_suite
from trajgrade.config.decode import decode_config
from trajgrade.engine.engine import Engine
from trajgrade.engine.state import NO_CALLS
from trajgrade.graders.agentv import tool_trajectory
from trajgrade.graders.letta import tool as letta_tool
from trajgrade.graders.vally import tool_calls

if TYPE_CHECKING:
    from strategies import Stream, SuiteCase

    from trajgrade.config.model import Suite
    from trajgrade.verdicts import GuardDecision, Verdict

_TOOL = st.sampled_from(TOOLS)


@st.composite
def trajectory_config(draw: st.DrawFn) -> dict[str, Any]:
    """An agentv tool_trajectory entry over the strategies' tool vocabulary."""
    mode = draw(
        st.sampled_from(["any_order", "in_order", "exact", "superset", "subset"])
    )
    if mode == "any_order":
        names = draw(st.lists(_TOOL, min_size=1, max_size=3, unique=True))
        return {"mode": mode, "minimums": {n: draw(st.integers(0, 2)) for n in names}}
    items = draw(st.lists(_TOOL, min_size=1, max_size=4))
    cfg: dict[str, Any] = {"mode": mode, "expected": [{"tool": n} for n in items]}
    if draw(st.booleans()):
        cfg["threshold"] = draw(st.sampled_from([0.5, 0.8, 1.0]))
    return cfg


@st.composite
def letta_config(draw: st.DrawFn) -> dict[str, Any]:
    """A letta-evals tool grader with a built-in extractor and function."""
    extractor = draw(
        st.sampled_from(
            ["last_assistant", "first_assistant", "tool_arguments", "tool_output"]
        )
    )
    cfg: dict[str, Any] = {
        "extractor": extractor,
        "function": draw(st.sampled_from(["ascii_printable_only", "contains"])),
    }
    if extractor.startswith("tool_"):
        cfg["extractor_config"] = {"tool_name": draw(_TOOL)}
    return cfg


@st.composite
def mixed_suites(draw: st.DrawFn) -> Suite:
    """The strategies' tool-calls/metric suites plus trajectory, letta,
    coverage and rule graders."""
    case: SuiteCase = draw(suites(max_graders=4))
    graders = list(case.config["graders"])
    extra = draw(
        st.lists(
            st.one_of(
                st.tuples(st.just("tool_trajectory"), trajectory_config()),
                st.tuples(st.just("letta-tool"), letta_config()),
                _rule(),  # the stateful guard rules (judge every call)
                st.tuples(
                    st.just("function_call_coverage"),
                    st.fixed_dictionaries(
                        {
                            "function_calls": st.lists(_TOOL, max_size=3).map(
                                json.dumps
                            ),
                            "mode": st.sampled_from(["any_order", "in_order"]),
                        }
                    ),
                ),
            ),
            max_size=3,
        )
    )
    for kind, cfg in extra:
        graders.append({"type": kind, "name": f"x{len(graders)}", "config": cfg})
    for g in graders:
        # abort makes traces sticky (every later call refused); the default
        # is abort for budgets, deny for the rest.
        action = draw(st.sampled_from([None, "abort", "deny", "report"]))
        if action is not None:
            g["on_fail"] = action
    text = yaml.safe_dump({"graders": graders}, sort_keys=False)
    return compile_suite(decode_config(text))


def _reference(
    suite: Suite, stream: Stream
) -> tuple[list[Verdict], list[GuardDecision]]:
    ref = ReferenceEngine(suite)
    out = [v for ev in stream.events for v in ref.feed(ev)]
    return out + ref.finish(), ref.decisions


@settings(max_examples=300, deadline=None)
@given(suite=mixed_suites(), stream=streams(max_traces=4), data=st.data())
def test_engine_equals_the_reference_engine(
    suite: Suite, stream: Stream, data: st.DataObject
) -> None:
    """Random suites, interleaved traces, random batches: identical verdicts
    and guard decisions."""
    engine = Engine(suite)
    # An engine whose decisions nobody reads (a plain grading run) skips
    # the guard: its verdicts must not change.
    silent = Engine(suite, guarding=False)
    got: list[Verdict] = []
    quiet: list[Verdict] = []
    events = stream.events
    i = 0
    while i < len(events):
        n = data.draw(st.integers(1, 8), label="batch")
        got += engine.feed_many(events[i : i + n])
        quiet += silent.feed_many(events[i : i + n])
        i += n
    got += engine.finish()
    quiet += silent.finish()
    want, decisions = _reference(suite, stream)
    assert got == want
    assert engine.decisions == decisions
    assert quiet == want
    assert silent.decisions == []
    # The containers states share where their mode never writes stay empty.
    assert tool_trajectory._EMPTY == [] and tool_trajectory._NO_OPEN == {}
    assert tool_calls._NO_COUNTS == [] and letta_tool._NO_GRADES == []
    assert NO_CALLS == {}


def test_the_reference_engine_can_tell_a_difference() -> None:
    """The property is not vacuous: a grader the engine never steps shows."""
    suite = compile_suite(
        decode_config(
            "graders:\n  - {type: tool-calls, name: a, config: {disallowed: [rm_rf]}}\n"
        )
    )
    from trajgrade.events import ToolCall, TraceEnd

    stream_events = [
        ToolCall(trace_id="t", name="rm_rf", call_id="c1"),
        TraceEnd(trace_id="t"),
    ]
    ref = ReferenceEngine(suite)
    want = [v for ev in stream_events for v in ref.feed(ev)] + ref.finish()
    assert [v.outcome for v in want] == ["fail"]
    assert [(d.call_id, d.outcome) for d in ref.decisions] == [("c1", "fail")]
    # An engine that skipped the call (a wrong route) would pass the trace.
    skipped = Engine(suite)
    got = skipped.feed_many(stream_events[1:]) + skipped.finish()
    assert got != want


def test_a_settled_grader_comes_back_for_its_dataset_row() -> None:
    """letta's extraction is done at the first assistant message and no row
    is known: the grader leaves the trace's routes (later messages skip it),
    and a trace_start bringing the row puts it back, as the reference says."""
    from trajgrade.events import Message, TraceEnd, TraceStart

    suite = compile_suite(
        decode_config(
            "graders:\n  - {type: letta-tool, name: l, config: "
            "{extractor: first_assistant, function: contains}}\n"
        )
    )
    row = {"input": "q", "ground_truth": "hello"}
    events = [
        Message(trace_id="t", role="assistant", text="hello world"),
        Message(trace_id="t", role="assistant", text="later text"),
        TraceStart(trace_id="t", metadata={"sample": row}),
        Message(trace_id="t", role="assistant", text="after the row"),
        TraceEnd(trace_id="t"),
    ]
    engine = Engine(suite)
    got = engine.feed_many(events[:2])
    assert engine._table.open["t"].parked  # left the routes: it is settled
    got += engine.feed_many(events[2:]) + engine.finish()
    want, _ = _reference(suite, _Events(events))
    assert got == want
    assert [(v.outcome, v.at_event, v.final) for v in got] == [("pass", 3, True)]


class _Events:
    def __init__(self, events: list[Any]) -> None:
        self.events = events
