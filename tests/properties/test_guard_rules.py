"""Properties of the stateful guard rules (cost-budget, rate-limit, loop,
flow): streaming equals batch (and checkpoint restarts), an early verdict
never flips, state stays within its documented bounds, and every call that
violates a rule (by a brute-force reference over the whole history) is
judged, and no other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import Stream, encode_jsonl, streams
from tests.graders._guard import drive

from trajgrade.config.compile import compile_suite
from trajgrade.config.decode import decode_config
from trajgrade.config.model import Suite
from trajgrade.engine.engine import Engine
from trajgrade.events import Event, ToolCall, Usage
from trajgrade.graders.rules._shared import fingerprint
from trajgrade.pipeline.whole import grade_bytes
from trajgrade.verdicts import Outcome, Verdict

_NAME = st.sampled_from(["bash", "view|edit", "web_fetch", ".*"])


KINDS = ("cost-budget", "rate-limit", "loop", "flow")


@st.composite
def _rule(
    draw: st.DrawFn, kinds: tuple[str, ...] = KINDS
) -> tuple[str, dict[str, Any]]:
    kind = draw(st.sampled_from(kinds))
    if kind == "cost-budget":
        cfg: dict[str, Any] = {
            "max_usd": draw(st.sampled_from([0.0, 0.001, 0.01, 0.05])),
            "prices": {
                "m1": {
                    "input_mtok": 100.0,
                    "output_mtok": 300.0,
                    "cache_read_mtok": 10.0,
                }
            },
            "unknown_model": draw(st.sampled_from(["deny", "warn", "ignore"])),
        }
        if draw(st.booleans()):
            cfg["warn_at"] = draw(st.sampled_from([0.25, 0.5, 0.9]))
    elif kind == "rate-limit":
        cfg = {"match": draw(_NAME), "max": draw(st.integers(0, 3))}
        if draw(st.booleans()):
            cfg["window"] = draw(st.sampled_from(["1s", "3s", "500ms"]))
    elif kind == "loop":
        cfg = {}
        if draw(st.booleans()):
            cfg["ping_pong"] = draw(st.integers(4, 6))
        if not cfg or draw(st.booleans()):
            cfg["repeats"] = draw(st.integers(2, 3))
            if draw(st.booleans()):
                cfg["within"] = draw(st.integers(3, 6))
        if draw(st.booleans()):
            cfg["match"] = draw(_NAME)
    else:
        cfg = {"after": draw(_NAME)}
        if draw(st.booleans()):
            cfg["forbid"] = draw(_NAME)
        else:
            cfg["require"] = draw(_NAME)
            if draw(st.booleans()):
                cfg["within"] = draw(st.sampled_from([1, 2, "2s"]))
    return kind, cfg


@dataclass(frozen=True)
class Case:
    suite: Suite
    rules: list[tuple[str, dict[str, Any]]]


@st.composite
def rule_suites(draw: st.DrawFn, kinds: tuple[str, ...] = KINDS) -> Case:
    rules = draw(st.lists(_rule(kinds), min_size=1, max_size=4))
    entries = []
    for i, (k, c) in enumerate(rules):
        entry = {"type": k, "name": f"g{i}", "config": c}
        on_fail = draw(st.sampled_from([None, "deny", "abort", "warn"]))
        if on_fail is not None:
            entry["on_fail"] = on_fail
        entries.append(entry)
    doc = {"graders": entries}
    return Case(compile_suite(decode_config(yaml.safe_dump(doc))), rules)


@st.composite
def priced_streams(draw: st.DrawFn) -> Stream:
    """Streams whose usage events name a priced model, report a cost, or
    neither (an unknown model); and a few exact repeats of calls."""
    s = draw(streams(max_events=24))
    out: list[Event] = []
    last_calls: dict[str, list[ToolCall]] = {}
    for e in s.events:
        if type(e) is Usage:
            how = draw(st.sampled_from(["m1", "cost", "unknown"]))
            e = msgspec.structs.replace(
                e,
                model="m1" if how == "m1" else "mystery",
                cost_usd=draw(st.sampled_from([0.0, 0.004, 0.02]))
                if how == "cost"
                else None,
            )
        out.append(e)
        if type(e) is ToolCall:
            recent = last_calls.setdefault(e.trace_id, [])
            recent.append(e)
            del recent[:-2]
            # Repeat one of the last two calls now and then (A A, A B A B).
            for _ in range(draw(st.sampled_from([0, 0, 1, 3]))):
                again = (
                    recent[-2]
                    if len(recent) == 2 and draw(st.booleans())
                    else recent[-1]
                )
                again = msgspec.structs.replace(again, call_id=None)
                out.append(again)
                recent.append(again)
                del recent[:-2]
    traces: dict[str, list[Event]] = {}
    for e in out:
        traces.setdefault(e.trace_id, []).append(e)
    return Stream(traces=traces, events=out)


def _streamed(
    suite: Suite, events: list[Event], *, restart_at: int = -1
) -> list[Verdict]:
    engine = Engine(suite)
    out: list[Verdict] = []
    for i, ev in enumerate(events):
        if i == restart_at:
            state = msgspec.msgpack.decode(
                msgspec.msgpack.encode(engine.checkpoint()),
                type=type(engine.checkpoint()),
            )
            engine = Engine(suite)
            engine.load(state)
        out.extend(engine.feed(ev))
    out.extend(engine.finish())
    return out


@settings(max_examples=120, deadline=None)
@given(case=rule_suites(), stream=priced_streams(), data=st.data())
def test_streaming_equals_batch_and_checkpoints(
    case: Case, stream: Stream, data: st.DataObject
) -> None:
    streamed = _streamed(case.suite, stream.events)
    result = grade_bytes(case.suite, encode_jsonl(stream.events))
    assert result.errors == []
    assert result.verdicts == streamed
    cut = data.draw(st.integers(0, max(0, len(stream.events))), label="restart")
    assert _streamed(case.suite, stream.events, restart_at=cut) == streamed


@settings(max_examples=120, deadline=None)
@given(case=rule_suites(), stream=priced_streams())
def test_early_verdicts_never_flip(case: Case, stream: Stream) -> None:
    sealed: dict[tuple[str, str], Outcome] = {}
    for v in _streamed(case.suite, stream.events):
        key = (v.trace_id, v.grader)
        if not v.final:
            sealed[key] = v.outcome
        elif key in sealed:
            assert v.outcome is sealed[key]


def _bounded(kind: str, cfg: dict[str, Any], state: Any) -> None:
    if state is None:
        return
    if kind == "rate-limit":
        assert len(state.times) <= cfg["max"]
    elif kind == "loop":
        assert len(state.recent) <= cfg.get("within", 0)
    elif kind == "flow":
        assert len(state.values) <= 256 and len(state.pending) <= 64
    else:
        assert len(state.unknown) <= 16
    assert len(msgspec.msgpack.encode(state)) < 64_000


def _reference(kind: str, cfg: dict[str, Any], events: list[Event]) -> list[int]:
    """Indexes of the calls that violate the rule, from the whole history."""
    import re

    def hits(pattern: str, name: str) -> bool:
        return re.search(pattern, name) is not None

    out: list[int] = []
    calls = [(i, e) for i, e in enumerate(events) if type(e) is ToolCall]
    if kind == "rate-limit":
        counted: list[float] = []
        last = 0.0
        for i, c in calls:
            if not hits(cfg["match"], c.name):
                continue
            t = max(last, c.ts if c.ts is not None else last)
            last = t
            w = cfg.get("window")
            window = (
                None
                if w is None
                else float(w[:-2]) / 1000
                if w.endswith("ms")
                else float(w[:-1])
            )
            inside = [x for x in counted if window is None or x > t - window]
            if len(inside) >= cfg["max"]:
                out.append(i)
            else:
                counted.append(t)
    elif kind == "loop":
        seen = [
            (i, fingerprint(c))
            for i, c in calls
            if "match" not in cfg or hits(cfg["match"], c.name)
        ]
        fps = [f for _, f in seen]
        # The alternation: a call refused for completing one, made again at
        # once, is the same step (refused again, it does not break the run).
        steps: list[int] = []
        pinged = False
        for k, (i, f) in enumerate(seen):
            if not (pinged and steps and f == steps[-1]):
                steps.append(f)
            bad = False
            n = cfg.get("repeats")
            if n is not None:
                w = cfg.get("within")
                if w is None:
                    bad = k + 1 >= n and all(x == f for x in fps[k + 1 - n : k + 1])
                else:
                    bad = fps[max(0, k + 1 - w) : k + 1].count(f) >= n
            p = cfg.get("ping_pong")
            tail = steps[-p:] if p is not None and len(steps) >= p else []
            pinged = bool(tail) and (
                tail[0] != tail[1] and all(x == tail[j % 2] for j, x in enumerate(tail))
            )
            bad = bad or pinged
            if bad:
                out.append(i)
    elif kind == "flow" and "forbid" in cfg:
        fired = False
        for i, c in calls:
            if fired and hits(cfg["forbid"], c.name):
                out.append(i)
            fired = fired or hits(cfg["after"], c.name)
    return out


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_state_is_bounded_and_every_violating_call_is_judged(
    kind: str, data: st.DataObject
) -> None:
    case = data.draw(rule_suites((kind,)), label="suite")
    stream = data.draw(priced_streams(), label="stream")
    for events in stream.traces.values():
        for g, (kind, cfg) in zip(case.suite.graders, case.rules, strict=True):
            run = drive(g, events)
            _bounded(kind, cfg, run.state)
            judged = [i for i, _, j in run.judged if j.action is None]
            aborting = case.suite.on_fail[g.name] == "abort"
            if kind == "cost-budget" and aborting:
                # The run was aborted at the usage event that failed it: the
                # engine refuses every later call, the rule judges none.
                assert judged == []
            elif kind == "cost-budget":
                # From the usage that failed the budget on, every call.
                if run.decisions:
                    first = run.decisions[0][0]
                    expected = [
                        i
                        for i, e in enumerate(events)
                        if type(e) is ToolCall and i > first
                    ]
                    assert judged == expected
                else:
                    assert judged == []
            elif kind != "flow" or "forbid" in cfg:
                expected = _reference(kind, cfg, events)
                # Aborted at its first violation, the rule judges no later call.
                assert judged == (expected[:1] if aborting else expected)
            # Judged calls and the verdict agree: a judged call fails the trace.
            if judged:
                assert run.final.outcome is Outcome.FAIL
                assert run.decisions and not run.decisions[0][1].final
