"""What agentv's ``tool-trajectory.ts`` reports for a trace: hits, misses,
aspects and score, texts included, computed from the per-trace state the
``tool_trajectory`` grader keeps while events stream in.

:func:`score` answers "what would agentv say if the trace ended now":
undecided expected items miss, and latency checks still waiting for a
duration are skipped (no duration data: neutral, out of the denominator).
"""

from __future__ import annotations

from typing import Final, NamedTuple

import msgspec

from trajgrade._util.js import js_number

__all__ = (
    "ARGS",
    "FAST",
    "HIT",
    "NONE",
    "NO_TRACE",
    "OPEN",
    "SKIP",
    "SLOW",
    "SUBSET_LISTED_MAX",
    "WAIT",
    "WRONG",
    "Plan",
    "Score",
    "TrajectoryState",
    "score",
)

# Per expected item: what its sequence check found.
OPEN, HIT, ARGS, WRONG = 0, 1, 2, 3
# Per expected item: its latency check (SKIP: the call had no duration).
NONE, WAIT, FAST, SLOW, SKIP = 0, 1, 2, 3, 4
#: subset: how many calls are listed one by one (agentv lists every call);
#: the rest are counted, so state and verdicts stay bounded however many
#: calls a trace makes. The score counts every call.
SUBSET_LISTED_MAX: Final = 1000


class TrajectoryState(msgspec.Struct, array_like=True, gc=False):
    """Per-trace state of a ``tool_trajectory`` grader: counters and per-item
    marks, plain data (the checkpoint)."""

    calls: int = 0
    #: A tool call or an output message was seen (the "no trace" rule).
    output: bool = False
    sealed: bool = False
    #: any_order: minimums met; in_order: the cursor; superset: items
    #: matched; subset: calls allowed.
    done: int = 0
    #: in_order/exact: sequence and latency hits so far.
    hits: int = 0
    #: Latency checks waiting for a duration, and those skipped without one.
    waiting: int = 0
    skipped: int = 0
    counts: list[int] = msgspec.field(default_factory=list)
    marks: list[int] = msgspec.field(default_factory=list)
    #: The call index an item examined (in_order, superset).
    at: list[int] = msgspec.field(default_factory=list)
    #: exact: the tool actually called at a wrong position.
    got: list[str] = msgspec.field(default_factory=list)
    latency: list[int] = msgspec.field(default_factory=list)
    duration: list[float] = msgspec.field(default_factory=list)
    #: Calls without a result yet -> the item whose duration they give (-1: none).
    open: dict[str, int] = msgspec.field(default_factory=dict)
    #: subset: each call's name and whether some item allows it (the first
    #: SUBSET_LISTED_MAX calls; ``done`` counts every allowed call).
    seen: list[tuple[str, bool]] = msgspec.field(default_factory=list)


class Score(msgspec.Struct, frozen=True):
    """agentv's EvaluationScore, with its assertions split by outcome."""

    hits: list[str]
    misses: list[str]
    aspects: int
    score: float
    #: What agentv logs with console.warn (skipped latency checks).
    warnings: list[str]


NO_TRACE: Final = Score([], ["No trace available for evaluation"], 1, 0.0, [])


class Plan(NamedTuple):
    """The compiled config that scoring needs."""

    mode: str
    minimums: tuple[tuple[str, float], ...]
    tools: tuple[str, ...]
    limits: tuple[float | None, ...]
    #: "at least" as the agentv release writes it (``>=`` or ``≥``).
    at_least: str


def score(plan: Plan, state: TrajectoryState) -> Score:
    """agentv's result for the trace as it stands."""
    mode = plan.mode
    if mode == "any_order":
        return _any_order(plan, state)
    if not plan.tools:
        if mode == "subset" and state.calls:
            text = f"{state.calls} unexpected tool call(s) with empty allowed list"
            return Score([], [text], state.calls, 0.0, [])
        empty = {
            "superset": "No expected tools specified",
            "subset": "No tool calls and no expected tools",
        }.get(mode, "No tool sequence specified")
        return Score([empty], [], 0, 1.0, [])
    if mode == "superset":
        return _superset(plan, state)
    if mode == "subset":
        return _subset(state)
    return _sequence(plan, state)


def _any_order(plan: Plan, state: TrajectoryState) -> Score:
    if not plan.minimums:
        return Score(["No tool requirements specified"], [], 0, 1.0, [])
    hits: list[str] = []
    misses: list[str] = []
    for (tool, least), n in zip(plan.minimums, state.counts, strict=True):
        text = f"{tool}: called {n} times (required {plan.at_least}{js_number(least)})"
        (hits if n >= least else misses).append(text)
    total = len(plan.minimums)
    return Score(hits, misses, total, len(hits) / total, [])


def _superset(plan: Plan, state: TrajectoryState) -> Score:
    hits: list[str] = []
    misses: list[str] = []
    for tool, at in zip(plan.tools, state.at, strict=True):
        if at >= 0:
            hits.append(f"Found {tool} at position {at}")
        else:
            misses.append(f"Expected {tool} not found in actual trajectory")
    total = len(plan.tools)
    return Score(hits, misses, total, len(hits) / total, [])


def _subset(state: TrajectoryState) -> Score:
    if not state.calls:
        return Score(["No actual tool calls (trivially a subset)"], [], 0, 1.0, [])
    hits: list[str] = []
    misses: list[str] = []
    for pos, (name, ok) in enumerate(state.seen):
        if ok:
            hits.append(f"Position {pos}: {name} is in allowed set")
        else:
            misses.append(f"Position {pos}: {name} is not in allowed set")
    listed = len(state.seen)
    if listed >= SUBSET_LISTED_MAX and state.calls > listed:
        # Past the listed calls only counts are kept (trajgrade's bound).
        where = f"Positions {listed}-{state.calls - 1}"
        allowed = state.done - len(hits)
        others = state.calls - listed - allowed
        if allowed:
            hits.append(f"{where}: {allowed} more calls in allowed set")
        if others:
            misses.append(f"{where}: {others} more calls not in allowed set")
    return Score(hits, misses, state.calls, state.done / state.calls, [])


def _sequence(plan: Plan, state: TrajectoryState) -> Score:
    """in_order and exact: one aspect per item plus one per latency limit."""
    in_order = plan.mode == "in_order"
    n = len(plan.tools)
    hits: list[str] = []
    misses: list[str] = []
    warnings: list[str] = []
    if not in_order and state.calls != n:
        # Reported, but not an aspect: extra calls do not lower the score.
        misses.append(f"Expected {n} tool calls, got {state.calls}")
    for i, tool in enumerate(plan.tools):
        mark = state.marks[i]
        if mark == HIT:
            hits.append(
                f"Found {tool} at position {state.at[i]}"
                if in_order
                else f"Position {i}: {tool}"
            )
            _latency(plan, state, i, hits, misses, warnings)
        elif mark == ARGS:
            misses.append(
                f"Expected {tool} at position {i}: tool found at {state.at[i]} but args mismatch"
                if in_order
                else f"Position {i}: {tool} args mismatch"
            )
        elif mark == WRONG:
            misses.append(f"Position {i}: expected {tool}, got {state.got[i]}")
        else:
            misses.append(
                f"Expected {tool} at position {i}, not found in remaining trace"
                if in_order
                else f"Position {i}: expected {tool}, got nothing"
            )
    limits = sum(limit is not None for limit in plan.limits)
    # A limit on an item that missed stays in the denominator (agentv's
    # implicit miss); a skipped one leaves it.
    aspects = n + limits - len(warnings)
    return Score(hits, misses, aspects, len(hits) / aspects, warnings)


def _latency(
    plan: Plan,
    state: TrajectoryState,
    i: int,
    hits: list[str],
    misses: list[str],
    warnings: list[str],
) -> None:
    limit = plan.limits[i]
    if limit is None:
        return
    tool = plan.tools[i]
    took, most = js_number(state.duration[i]), js_number(limit)
    lat = state.latency[i]
    if lat == FAST:
        hits.append(f"{tool} completed in {took}ms (max: {most}ms)")
    elif lat == SLOW:
        misses.append(f"{tool} took {took}ms (max: {most}ms)")
    else:
        warnings.append(f"No duration data for {tool}; latency assertion skipped")
