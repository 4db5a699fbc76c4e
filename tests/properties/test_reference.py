"""Final verdicts (early or not) equal a naive whole-trace re-grade.

The reference below is written from the documented semantics (the docstrings
of ``graders/vally/tool_calls.py`` and ``graders/vally/metric_threshold.py``), as plain
functions over a trace's whole event list: pairing, steps, counts and the
sequence cursor are recomputed from scratch for every prefix they need, and
the first decisive event of the trace wins. Regexes are the simple ones from
``strategies``, evaluated with Python's ``re``.

Where the documentation is silent the reference follows the engine's choice,
and says so:

* within one ``tool_call``, entries are tried in the order disallowed (no
  ``result`` filter), disallowed (with ``result``), required, sequence; the
  first that fails or hits a configuration error decides;
* a required entry is only tried on calls inside its step window, and only the
  sequence entry the cursor is at is tried;
* a reused ``call_id`` replaces the earlier open call with that id.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import (
    COMMAND_PATTERNS,
    COMMANDS,
    PATH_PATTERNS,
    PATHS,
    Stream,
    SuiteCase,
    streams,
    suites,
)

from trajgrade.config.compile import compile_suite
from trajgrade.config.decode import decode_config
from trajgrade.engine.engine import Engine
from trajgrade.events import AgentError, ToolCall, ToolResult, TurnStart, Usage
from trajgrade.verdicts import Outcome

if TYPE_CHECKING:
    from trajgrade.events import Event

INF = float("inf")
DURATION_MS = {
    "0ms": 0,
    "1ms": 1,
    "500ms": 500,
    "1s": 1000,
    "2s": 2000,
    "3.5s": 3500,
    "1s500ms": 1500,
    "1m": 60_000,
}


# ------------------------------------------------------------------ matching
def _search(pattern: str, text: str) -> bool:
    # JavaScript's ``$`` (no m flag) is end of input only; Python's also
    # matches before a final newline.
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    return re.search(pattern, text) is not None


def _stringify(value: Any) -> str:
    """JSON.stringify, strings raw (what vally matches ``result`` against)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class _ConfigError(Exception):
    """A filtered ``command``/``path`` is absent or not a string."""


@dataclass
class M:
    """One matcher entry, shorthand expanded."""

    name: str
    command: str | None = None
    path: str | None = None
    args: dict[str, str] = field(default_factory=dict)
    result: str | None = None
    min_count: int = 1
    final: bool = False
    at_step: int | None = None
    before_step: int | None = None

    def in_window(self, step: int) -> bool:
        if self.at_step is not None and step != self.at_step:
            return False
        return self.before_step is None or step < self.before_step

    @property
    def window_end(self) -> int | None:
        if self.at_step is not None:
            return self.at_step + 1
        return self.before_step

    def matches(self, call: ToolCall) -> bool:
        """Call-side match; _ConfigError when the name matches and a filtered
        ``command``/``path`` is absent or not a string (documented)."""
        if not _search(self.name, call.name):
            return False
        args = call.args or {}
        filters = [(k, p) for k, p in (("command", self.command), ("path", self.path))]
        for key, pattern in filters:
            if pattern is not None and not isinstance(args.get(key), str):
                raise _ConfigError(key)
        for key, pattern in [*filters, *self.args.items()]:
            if pattern is None:
                continue
            value = args.get(key)
            if not isinstance(value, str) or not _search(pattern, value):
                return False
        return True

    def result_ok(self, result: ToolResult) -> bool:
        return self.result is None or _search(self.result, _stringify(result.result))


def _entries(raw: list[Any] | None) -> list[M]:
    return [M(name=e) if isinstance(e, str) else M(**e) for e in raw or ()]


# ------------------------------------------------------------------ trace facts
def _steps(events: list[Event]) -> list[int]:
    """Step of every event: turn_starts seen so far, minus one, at least 0."""
    out = []
    for j in range(len(events)):
        turns = sum(type(e) is TurnStart for e in events[: j + 1])
        out.append(max(turns - 1, 0))
    return out


def _pairing(events: list[Event]) -> tuple[dict[int, int], dict[int, float]]:
    """``result index -> call index``, and when each call stopped being open
    (its result, or the call that reused its id)."""
    pairs: dict[int, int] = {}
    closed: dict[int, float] = {}
    open_calls: list[tuple[str | None, int]] = []  # oldest first
    for j, ev in enumerate(events):
        if type(ev) is ToolCall:
            if ev.call_id is not None:
                for cid, c in list(open_calls):
                    if cid == ev.call_id:
                        open_calls.remove((cid, c))
                        closed[c] = j
            open_calls.append((ev.call_id, j))
            closed[j] = INF
        elif type(ev) is ToolResult:
            if ev.call_id is None:
                hit = open_calls[0] if open_calls else None
            else:
                hit = next((oc for oc in open_calls if oc[0] == ev.call_id), None)
            if hit is not None:
                open_calls.remove(hit)
                pairs[j] = hit[1]
                closed[hit[1]] = j
    return pairs, closed


def reference_tool_calls(cfg: dict[str, Any], events: list[Event]) -> Outcome:
    """The documented tool-calls outcome of one whole trace."""
    req = _entries(cfg.get("required"))
    dis = _entries(cfg.get("disallowed"))
    seq = _entries(cfg.get("sequence"))
    dis_now = [m for m in dis if m.result is None]
    dis_result = [m for m in dis if m.result is not None]
    can_pass_early = not dis and not any(m.final for m in req)
    steps = _steps(events)
    pairs, closed = _pairing(events)
    calls = [j for j, e in enumerate(events) if type(e) is ToolCall]

    def counts(upto: int) -> list[int]:
        """Completed matching calls per required entry, results before ``upto``."""
        out = []
        for m in req:
            n = 0
            for r, c in pairs.items():
                call = events[c]
                if r < upto and m.in_window(steps[c]) and m.matches(call):  # type: ignore[arg-type]
                    n += m.result_ok(events[r])  # type: ignore[arg-type]
            out.append(n)
        return out

    def cursor(upto: int) -> int:
        """Sequence entries matched in order by calls before ``upto``."""
        k = 0
        for c in calls:
            if c < upto and k < len(seq) and seq[k].matches(events[c]):  # type: ignore[arg-type]
                k += 1
        return k

    def complete(upto: int) -> bool:
        met = all(n >= m.min_count for n, m in zip(counts(upto), req, strict=True))
        return met and cursor(upto) == len(seq)

    for j, ev in enumerate(events):
        if type(ev) is ToolCall:
            try:
                if any(m.matches(ev) for m in dis_now):
                    return Outcome.FAIL
                for m in dis_result:
                    m.matches(ev)
                for m in req:
                    if m.in_window(steps[j]):
                        m.matches(ev)
                k = cursor(j)
                if k < len(seq):
                    seq[k].matches(ev)
            except _ConfigError:
                return Outcome.ERROR
        elif type(ev) is ToolResult and j in pairs:
            call = events[pairs[j]]
            for m in dis_result:
                if m.matches(call) and m.result_ok(ev):  # type: ignore[arg-type]
                    return Outcome.FAIL
        elif type(ev) is TurnStart:
            now = counts(j)
            for i, m in enumerate(req):
                if m.window_end != steps[j] or now[i] >= m.min_count:
                    continue
                still_open = any(
                    c < j < closed[c] and m.in_window(steps[c]) and m.matches(events[c])  # type: ignore[arg-type]
                    for c in calls
                )
                if not still_open:
                    return Outcome.FAIL
        if can_pass_early and (req or seq) and complete(j + 1):
            return Outcome.PASS
    end = len(events)
    for n, m in zip(counts(end), req, strict=True):
        if n < m.min_count:
            return Outcome.FAIL
    last = calls[-1] if calls else None
    for m in req:
        if not m.final:
            continue
        done = next((r for r, c in pairs.items() if c == last), None)
        if last is None or done is None:
            return Outcome.FAIL
        call, result = events[last], events[done]
        if not (m.in_window(steps[last]) and m.matches(call) and m.result_ok(result)):  # type: ignore[arg-type]
            return Outcome.FAIL
    if cursor(end) < len(seq):
        return Outcome.FAIL
    return Outcome.PASS


def reference_metric(kind: str, cfg: dict[str, Any], events: list[Event]) -> float:
    """The documented value of a metric over one whole trace."""
    if kind == "token-budget":
        return sum(e.input_tokens + e.output_tokens for e in events if type(e) is Usage)
    if kind == "tool-call-count":
        return sum(type(e) is ToolCall for e in events)
    if kind == "turn-count":
        return sum(type(e) is TurnStart for e in events)
    if kind == "error-count":
        tool_errors = cfg.get("include_tool_errors", False)
        return sum(
            type(e) is AgentError
            or (tool_errors and type(e) is ToolResult and e.is_error is True)
            for e in events
        )
    assert kind == "wall-time"
    stamps = [e.ts for e in events if e.ts is not None]
    return round((max(stamps) - min(stamps)) * 1000) if stamps else 0


def reference(
    kind: str, cfg: dict[str, Any], events: list[Event]
) -> tuple[Outcome, float]:
    """(outcome, score) a whole-trace re-grade gives."""
    if kind == "tool-calls":
        outcome = reference_tool_calls(cfg, events)
        return outcome, 1.0 if outcome is Outcome.PASS else 0.0
    value = reference_metric(kind, cfg, events)
    limit = float(DURATION_MS[cfg["max"]] if kind == "wall-time" else cfg["max"])
    if value <= limit:
        return Outcome.PASS, 1.0
    return Outcome.FAIL, max(0.0, 1.0 - (value - limit) / max(limit, 1.0))


# ------------------------------------------------------------------ properties
def _check(case: SuiteCase, stream: Stream) -> None:
    engine = Engine(case.suite)
    verdicts = engine.feed_all(stream.events) + engine.finish()
    finals = {(v.trace_id, v.grader): v for v in verdicts if v.final}
    for tid, events in stream.traces.items():
        if not events:
            continue
        for name, spec in case.grader_configs().items():
            v = finals[(tid, name)]
            want = reference(spec["type"], spec["config"], events)
            assert (v.outcome, v.score) == want, (
                f"trace {tid}, grader {name} ({spec['type']}): engine says "
                f"{v.outcome}/{v.score} ({v.evidence!r}, early={v.early}); "
                f"the whole-trace re-grade says {want[0]}/{want[1]}"
            )


@settings(max_examples=200, deadline=None)
@given(
    case=suites(metrics=False, max_graders=3),
    stream=streams(max_traces=2),
)
def test_tool_calls_match_reference(case: SuiteCase, stream: Stream) -> None:
    """Each tool-calls final verdict has the outcome and score of the whole-trace reference."""
    _check(case, stream)


@settings(max_examples=150, deadline=None)
@given(case=suites(tool_calls=False), stream=streams(max_traces=2))
def test_metrics_match_reference(case: SuiteCase, stream: Stream) -> None:
    """Each metric final verdict has the outcome and linear score of the whole-trace value."""
    _check(case, stream)


@settings(max_examples=150, deadline=None)
@given(case=suites(), stream=streams(max_traces=3))
def test_mixed_suites_match_reference(case: SuiteCase, stream: Stream) -> None:
    """In mixed suites on interleaved traces, every final verdict matches the reference."""
    _check(case, stream)


# ------------------------------------------------------------------ targeted
_CALL_ID = st.sampled_from(["c1", "c1", "c2", None])
_RESULT_ID = st.sampled_from([None, None, "c1", "c2"])


@st.composite
def _reuse_traces(draw: st.DrawFn) -> list[Event]:
    """Calls and results over two ids (often reused) and none (often absent)."""
    events: list[Event] = []
    for i in range(draw(st.integers(2, 9))):
        op = draw(st.sampled_from(["call", "call", "call", "result", "result", "turn"]))
        if op == "call":
            events.append(
                ToolCall(
                    trace_id="t0",
                    ts=float(i),
                    name=draw(st.sampled_from(["bash", "view"])),
                    call_id=draw(_CALL_ID),
                    args={"command": "ls", "path": "src/app.py"},
                )
            )
        elif op == "result":
            events.append(
                ToolResult(
                    trace_id="t0",
                    ts=float(i),
                    call_id=draw(_RESULT_ID),
                    result=draw(st.sampled_from(["ok", "error"])),
                )
            )
        else:
            events.append(TurnStart(trace_id="t0", ts=float(i)))
    return events


def _case(config: dict[str, Any]) -> SuiteCase:
    text = yaml.safe_dump(config, sort_keys=False)
    return SuiteCase(
        config=config, yaml_text=text, suite=compile_suite(decode_config(text))
    )


_REQUIRED_ONLY = st.sampled_from(["bash", "view"]).map(
    lambda name: _case(
        {
            "graders": [
                {"type": "tool-calls", "name": "g0", "config": {"required": [name]}}
            ]
        }
    )
) | st.builds(
    lambda entries: _case(
        {
            "graders": [
                {"type": "tool-calls", "name": "g0", "config": {"required": entries}}
            ]
        }
    ),
    st.lists(
        st.fixed_dictionaries(
            {"name": st.sampled_from(["bash", "view"])},
            optional={
                "min_count": st.integers(1, 2),
                "result": st.just("ok"),
                "final": st.booleans(),
            },
        ),
        min_size=1,
        max_size=2,
    ),
)


@settings(max_examples=400, deadline=None)
@given(case=_REQUIRED_ONLY, events=_reuse_traces())
def test_results_pair_as_documented_with_reused_call_ids(
    case: SuiteCase, events: list[Event]
) -> None:
    """With reused call ids, a result without an id still completes the oldest open call."""
    _check(case, Stream(traces={"t0": events}, events=events))


@st.composite
def _two_filter_cases(draw: st.DrawFn) -> tuple[SuiteCase, list[Event]]:
    """One entry filtering on both ``command`` and ``path``; calls with either,
    both or neither."""
    where = draw(st.sampled_from(["required", "disallowed", "sequence"]))
    entry = {
        "name": "bash",
        "command": draw(st.sampled_from(COMMAND_PATTERNS)),
        "path": draw(st.sampled_from(PATH_PATTERNS)),
    }
    case = _case(
        {"graders": [{"type": "tool-calls", "name": "g0", "config": {where: [entry]}}]}
    )
    events: list[Event] = []
    for i in range(draw(st.integers(1, 4))):
        args = {}
        if draw(st.booleans()):
            args["command"] = draw(st.sampled_from(COMMANDS))
        if draw(st.booleans()):
            args["path"] = draw(st.sampled_from(PATHS))
        events.append(
            ToolCall(
                trace_id="t0", ts=float(i), name="bash", call_id=f"c{i}", args=args
            )
        )
        events.append(
            ToolResult(trace_id="t0", ts=float(i), call_id=f"c{i}", result="ok")
        )
    return case, events


@settings(max_examples=100, deadline=None)
@given(case_events=_two_filter_cases())
def test_missing_filtered_arg_is_a_config_error_whatever_other_filters_say(
    case_events: tuple[SuiteCase, list[Event]],
) -> None:
    """A call whose name matches but lacks a filtered command/path gets an error verdict."""
    case, events = case_events
    _check(case, Stream(traces={"t0": events}, events=events))
