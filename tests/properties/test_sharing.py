"""One compiled Suite shared by engines in several threads (a web service's
thread pool) gives every engine exactly what it gives alone.

The promise (docs/library.md, "Threads"): a Suite is compiled once and
shared; each thread feeds its own Engine (or StreamGrader). Graders keep
per-grader caches (tool-name plans, the memo of the last judged call, name
matchers, genai-prices lookups, letta's regexes); filling them from several
threads at once must not change a verdict or a guard decision. Each example
compiles a fresh suite and runs the threads *first*, so the caches are
filled concurrently (lazy initialisation is where races hide), then runs
every stream alone, sequentially, and compares. A tiny switch interval makes
the threads interleave inside the graders' code. Every built-in grader type
is in the fixed suite, the letta custom function (a user's Python file)
included; the drawn suites add random mixes (test_routing.mixed_suites).
Each worker also moves its traces to a new engine halfway through (a
msgpack checkpoint of plain data): that must change nothing either.
"""

from __future__ import annotations

import copy
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import Stream, encode_jsonl, streams
from test_routing import mixed_suites

from trajgrade.api.stream_grader import StreamGrader
from trajgrade.config.compile import compile_suite
from trajgrade.config.decode import decode_config
from trajgrade.config.model import Suite
from trajgrade.engine.engine import Engine, EngineState
from trajgrade.events import Event, Usage
from trajgrade.graders import BUILTIN, BuildContext
from trajgrade.verdicts import GuardDecision, Verdict

FIXTURES = str(Path(__file__).resolve().parents[1] / "fixtures" / "letta")
WORKERS = 4

#: One grader of every built-in type (both spellings of the trajectory one).
EVERY_TYPE = """\
protect: {profile: strict}
graders:
  - type: tool-calls
    name: calls
    config:
      required: [{name: view, path: "\\\\.py$"}, {name: bash, result: ok}]
      disallowed:
        - {name: bash, command: rm}
        - {name: edit, path: secret}
        - {name: web_fetch, result: secret}
      sequence: [view, "^(bash|view)$"]
  - {type: token-budget, name: tokens, config: {max: 300}}
  - {type: tool-call-count, name: count, config: {max: 6}}
  - {type: turn-count, name: turns, config: {max: 4}}
  - {type: error-count, name: errors, config: {max: 1, include_tool_errors: true}}
  - {type: wall-time, name: wall, config: {max: 2s}}
  - type: tool-trajectory
    name: traj
    config: {mode: in_order, expected: [{tool: view}, {tool: bash}], threshold: 0.5}
  - type: tool_trajectory
    name: traj2
    config: {mode: any_order, minimums: {bash: 1, edit: 1}}
  - type: function_call_coverage
    name: cover
    config: {function_calls: '["bash", "view"]', mode: in_order}
  - {type: letta-tool, name: letta, config: {extractor: last_assistant, function: contains}}
  - type: letta-tool
    name: letta-custom
    config:
      extractor: "custom_graders.py:tool_names"
      function: "custom_graders.py:valid_json_with_field"
  - type: cost-budget
    name: cost
    config:
      max_usd: 0.01
      unknown_model: warn
      prices: {m1: {input_mtok: 100.0, output_mtok: 300.0}}
  - {type: rate-limit, name: rate, config: {match: bash, max: 2, window: 1s}}
  - {type: loop, name: loop, config: {repeats: 2, within: 4}}
  - {type: flow, name: flow, config: {after: view, require: bash, within: 2}}
"""
#: Models of usage events: genai-prices' (looked up lazily, per grader),
#: the config's own, none, and one nobody knows.
MODELS = ("gpt-4o", "claude-sonnet-4-5", "m1", None, "no-such-model")
#: Dataset rows (letta's ground truth) of the strategies' trace ids.
SAMPLES = {f"t{i}": {"input": "q", "ground_truth": "bash"} for i in range(4)}


def every_type() -> Suite:
    """A freshly compiled suite (cold caches) of every built-in grader type."""
    return compile_suite(
        decode_config(EVERY_TYPE, name="every.yaml", base_dir=FIXTURES),
        context=BuildContext(allow_code=True, base_dir=FIXTURES),
    )


@st.composite
def workload(draw: st.DrawFn) -> tuple[list[Event], list[int], int]:
    """One worker's interleaved traces (usage events priced by various
    models), its batch sizes, and where it moves to a new engine."""
    stream: Stream = draw(streams(max_traces=3, max_events=16))
    events = [
        msgspec.structs.replace(ev, model=draw(st.sampled_from(MODELS)))
        if type(ev) is Usage
        else ev
        for ev in stream.events
    ]
    sizes = draw(
        st.lists(st.integers(1, 6), min_size=len(events), max_size=len(events))
    )
    return events, sizes, draw(st.integers(0, len(events)))


Result = tuple[list[Verdict], list[GuardDecision]]


def run(
    suite: Suite, work: tuple[list[Event], list[int], int], *, move: bool = True
) -> Result:
    """Feed one worker's events to its own engine, in its batches (moving
    to a new engine at its point, unless ``move`` is false)."""
    events, sizes, move_at = work
    if not move:
        move_at = -1
    engine = Engine(suite, samples=SAMPLES)
    got: list[Verdict] = []
    decisions: list[GuardDecision] = []
    i = 0
    for n in sizes:
        if i >= len(events):
            break
        if i <= move_at < i + n:
            # Everything a trace holds is plain data: a new engine restored
            # from the bytes carries on as the old one would have.
            data = msgspec.msgpack.encode(engine.checkpoint())
            decisions += engine.decisions
            engine = Engine(suite, samples=SAMPLES)
            engine.load(msgspec.msgpack.decode(data, type=EngineState))
        got += engine.feed_many(events[i : i + n])
        i += n
    got += engine.finish()
    return got, decisions + engine.decisions


def run_in_threads(suite: Suite, works: list[Any]) -> list[Result | BaseException]:
    """Every workload on its own thread, all started together."""
    results: list[Result | BaseException] = [RuntimeError("not run")] * len(works)
    start = threading.Barrier(len(works))

    def worker(k: int) -> None:
        start.wait()
        try:
            results[k] = run(suite, works[k])
        except BaseException as exc:  # reported by the test, not lost in the thread
            results[k] = exc

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(len(works))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


@pytest.fixture(autouse=True)
def _switch_often() -> Iterator[None]:
    """Switch threads every few microseconds (default 5 ms): the threads
    interleave inside the graders instead of taking turns per example."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(old)


def check(suite: Suite, works: list[Any], alone: Suite) -> None:
    together = run_in_threads(suite, works)
    for k, work in enumerate(works):
        got = together[k]
        if isinstance(got, BaseException):
            raise got
        assert got == run(alone, work, move=False), f"worker {k} differs"


@settings(max_examples=40, deadline=None)
@given(works=st.lists(workload(), min_size=WORKERS, max_size=WORKERS))
def test_every_grader_type_shared_by_threads(works: list[Any]) -> None:
    """A cold suite of every grader type, shared by four threads: each
    thread's verdicts and guard decisions equal its stream run alone."""
    check(every_type(), works, every_type())


@settings(max_examples=40, deadline=None)
@given(
    suite=mixed_suites(), works=st.lists(workload(), min_size=WORKERS, max_size=WORKERS)
)
def test_random_suites_shared_by_threads(suite: Suite, works: list[Any]) -> None:
    """Random mixes (with random on_fail actions) shared by four threads,
    then the same streams alone on the same (now warm) suite."""
    check(suite, works, suite)


def test_every_builtin_type_is_in_the_shared_suite() -> None:
    """A new built-in grader type must join the threads test."""
    config = yaml.safe_load(EVERY_TYPE)
    # `protect` is written as the top-level section, not a graders entry.
    types = {g["type"] for g in config["graders"]} | ({"protect"} & set(config))
    assert types == set(BUILTIN)


def test_threads_pricing_their_first_usage_at_once() -> None:
    """A cost-budget grader loads genai-prices for the first usage event it
    prices; threads pricing at the same moment all get the price (a lookup
    in the middle of the loading read no table: an error verdict, about
    one run in sixty with eight threads)."""
    text = "graders:\n  - {type: cost-budget, name: cost, config: {max_usd: 1}}\n"
    usage = Usage(trace_id="t0", input_tokens=1000, output_tokens=10, model="gpt-4o")
    work = ([usage], [1], 5)
    want = run(compile_suite(decode_config(text)), work)
    assert [(v.outcome, v.metadata["usage_events"]) for v in want[0]] == [("pass", 1)]
    for _ in range(300):
        suite = compile_suite(decode_config(text))
        assert run_in_threads(suite, [work] * 8) == [want] * 8


def _wreck(value: Any) -> None:
    """Clear every dict and list in ``value``, as a careless caller might."""
    if isinstance(value, dict):
        for v in list(value.values()):
            _wreck(v)
        value.clear()
        value["x"] = 1
    elif isinstance(value, list):
        for v in value:
            _wreck(v)
        value[:] = ["x"]


@settings(max_examples=60, deadline=None)
@given(work=workload())
def test_a_verdict_is_the_callers_to_change(work: Any) -> None:
    """Wrecking each verdict's metadata as it arrives changes no later
    verdict (agentv's "no trace" lists were shared by every trace of the
    process: clearing one verdict's ``misses`` emptied them all)."""
    suite = every_type()
    want = copy.deepcopy(run(suite, work)[0])
    engine = Engine(suite, samples=SAMPLES)
    got: list[Verdict] = []
    for batch in [*([ev] for ev in work[0]), None]:
        verdicts = engine.finish() if batch is None else engine.feed_many(batch)
        got += copy.deepcopy(verdicts)
        for v in verdicts:
            _wreck(v.metadata)
    assert got == want
    # Nor does it change what another suite of the process says.
    assert run(every_type(), work)[0] == want


def read(suite: Suite, work: tuple[list[Event], list[int], int]) -> Result:
    """One worker's events as canonical JSONL bytes through its own
    StreamGrader (format detection, line framing), cut into chunks."""
    events, sizes, _ = work
    data = encode_jsonl(events)
    grader = StreamGrader(suite, samples=SAMPLES, source="w")
    got: list[Verdict] = []
    at = 0
    for n in sizes:
        got += grader.feed_bytes(data[at : at + 7 * n], source="w")
        at += 7 * n
    got += grader.feed_bytes(data[at:], source="w") + grader.finish()
    assert grader.errors == []
    return got, grader.take_decisions()


@settings(max_examples=25, deadline=None)
@given(works=st.lists(workload(), min_size=WORKERS, max_size=WORKERS))
def test_stream_graders_in_threads_read_as_alone(works: list[Any]) -> None:
    """StreamGraders (their decoders and format readers their own) on one
    cold suite in four threads: each gives what it gives alone. (No
    wall-time here: a StreamGrader reads the clock for it.)"""
    text = EVERY_TYPE.replace(
        "  - {type: wall-time, name: wall, config: {max: 2s}}\n", ""
    )

    def suite() -> Suite:
        return compile_suite(
            decode_config(text, name="every.yaml", base_dir=FIXTURES),
            context=BuildContext(allow_code=True, base_dir=FIXTURES),
        )

    shared = suite()
    assert not any(g.uses_clock for g in shared.graders)
    results: list[Any] = [None] * WORKERS
    start = threading.Barrier(WORKERS)

    def worker(k: int) -> None:
        start.wait()
        try:
            results[k] = read(shared, works[k])
        except BaseException as exc:  # reported below
            results[k] = exc

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    alone = suite()
    for k, work in enumerate(works):
        if isinstance(results[k], BaseException):
            raise results[k]
        assert results[k] == read(alone, work), f"worker {k} differs"
