"""Hypothesis strategies shared by the property tests: event streams and suites.

Traces are lists of canonical events over a small tool vocabulary, with turns,
calls and results paired by ``call_id`` (results sometimes missing, sometimes
without an id, sometimes flagged ``is_error``), usage, errors, messages and
non-decreasing timestamps (occasionally absent), optionally ending with
``trace_end``. Suites are random but *valid* mixes of ``tool-calls`` and metric
threshold graders, built through the public path: YAML text ->
``decode_config`` -> ``compile_suite``. Regexes are taken from a fixed list of
simple patterns so a test-side reference can evaluate them with Python ``re``.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Any

import msgspec
import yaml
from hypothesis import strategies as st

from trajgrade.config.compile import compile_suite
from trajgrade.config.decode import decode_config
from trajgrade.config.model import Suite
from trajgrade.events import (
    AgentError,
    Event,
    Message,
    ToolCall,
    ToolResult,
    TraceEnd,
    TraceStart,
    TurnStart,
    Usage,
)

__all__ = (
    "COMMANDS",
    "PATHS",
    "RESULTS",
    "TOOLS",
    "Stream",
    "SuiteCase",
    "args_for",
    "chunked",
    "encode_jsonl",
    "streams",
    "suites",
    "trace_events",
)

# ------------------------------------------------------------------ vocabulary
TOOLS = ("bash", "view", "edit", "web_fetch", "rm_rf")
COMMANDS = ("ls", "cat .env", "rm -rf /", "git push", "echo secret", "pytest -q")
PATHS = ("src/app.py", ".env", "/etc/passwd", "README.md", "secret.txt")
URLS = ("http://example.com", "https://api.test/x")
_NATURAL_KEY = {
    "bash": "command",
    "view": "path",
    "edit": "path",
    "rm_rf": "path",
    "web_fetch": "url",
}
_VALUES = {"command": COMMANDS, "path": PATHS, "url": URLS}
RESULTS: tuple[Any, ...] = (
    "ok",
    "OK done",
    "error: denied",
    "secret=42",
    "",
    None,
    7,
    True,
    {"status": "ok"},
    {"status": "error", "code": 2},
    ["a", 1],
)
_TS_STEPS = (0.0, 0.001, 0.1, 0.25, 0.5, 1.0, 1.5, 2.5)

# Simple regexes (JS flavour; literal fast path and the regex engine both used).
NAME_PATTERNS = (
    "bash",
    "^bash$",
    "view",
    "edit",
    "e",
    "^(bash|view)$",
    "web_fetch",
    "rm_rf",
    "^rm",
    "fetch$",
    "nosuchtool",
)
COMMAND_PATTERNS = ("rm", "ls", "^cat", "secret", "\\.env", "^git push$")
PATH_PATTERNS = ("\\.env$", "src/", "secret", "^/etc", "\\.py$")
ARG_PATTERNS = {"command": COMMAND_PATTERNS, "path": PATH_PATTERNS, "url": ("http",)}
RESULT_PATTERNS = ("ok", "OK", "secret", "error", "^$", "null", "status", "^7$")
DURATIONS = ("0ms", "1ms", "500ms", "1s", "2s", "3.5s", "1s500ms", "1m")


# ------------------------------------------------------------------ events
@functools.cache
def _pick(*values: Any) -> st.SearchStrategy[Any]:
    # Strategies are built once and reused: building them per draw is slow.
    return st.sampled_from(values)


@functools.cache
def _ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    return st.integers(lo, hi)


@st.composite
def _args(draw: st.DrawFn, name: str) -> dict[str, Any] | None:
    kind = draw(_ARG_KIND)
    key = _NATURAL_KEY[name]
    if kind == "none":
        return None
    if kind == "empty":
        return {}
    if kind == "non_string":
        return {key: draw(_NON_STRING)}
    other = draw(_pick(*(k for k in _VALUES if k != key)))
    if kind == "other":
        return {other: draw(_pick(*_VALUES[other]))}
    args = {key: draw(_pick(*_VALUES[key]))}
    if kind == "both":
        args[other] = draw(_pick(*_VALUES[other]))
    return args


_ARG_KIND = st.sampled_from(
    ["natural"] * 6 + ["none", "empty", "non_string", "other", "both"]
)
_NON_STRING = st.sampled_from([3, None, ["x"], {"k": "v"}, True])
_KINDS = st.sampled_from(
    ["call"] * 5
    + ["result"] * 4
    + ["turn"] * 3
    + ["usage"] * 2
    + ["error", "message", "orphan"]
)
_ID_KINDS = st.sampled_from(["fresh"] * 6 + ["none", "reuse"])
_ID_KINDS_NO_REUSE = st.sampled_from(["fresh"] * 6 + ["none"])
_TS_STEP = st.sampled_from(_TS_STEPS)
_TS_MISSING = st.integers(0, 15)
_TOOL = st.sampled_from(TOOLS)
_RESULT = st.sampled_from(RESULTS)
_IS_ERROR = st.sampled_from([None, False, True])
_TOKENS_IN = st.integers(0, 120)
_TOKENS_OUT = st.integers(0, 80)
_CACHE = st.sampled_from([0, 50])
_ONE_IN_SIX = st.integers(0, 5)


@st.composite
def trace_events(
    draw: st.DrawFn,
    trace_id: str = "t0",
    *,
    max_events: int = 24,
    end: bool | None = None,
    reuse_ids: bool = True,
) -> list[Event]:
    """One trace's events, in order; ``end`` None means "sometimes trace_end"."""
    ts = draw(_pick(0.0, 1000.0, 1_700_000_000.0))
    events: list[Event] = []

    def stamp() -> float | None:
        nonlocal ts
        ts += draw(_TS_STEP)
        return None if draw(_TS_MISSING) == 0 else ts

    if draw(st.booleans()):
        events.append(
            TraceStart(trace_id=trace_id, ts=stamp(), metadata={"task": "demo"})
        )
    open_calls: list[str | None] = []
    n_ids = 0
    for _ in range(draw(_ints(0, max_events))):
        kind = draw(_KINDS)
        if kind == "result" and not open_calls:
            kind = "call"
        if kind == "call":
            name = draw(_TOOL)
            id_kind = draw(_ID_KINDS if reuse_ids else _ID_KINDS_NO_REUSE)
            cid: str | None
            if id_kind == "reuse" and any(c is not None for c in open_calls):
                cid = draw(_pick(*(c for c in open_calls if c is not None)))
            elif id_kind == "none":
                cid = None
            else:
                n_ids += 1
                cid = f"c{n_ids}"
            open_calls.append(cid)
            events.append(
                ToolCall(
                    trace_id=trace_id,
                    ts=stamp(),
                    name=name,
                    call_id=cid,
                    args=draw(_ARGS[name]),
                )
            )
        elif kind == "result":
            i = draw(_ints(0, len(open_calls) - 1))
            cid = open_calls.pop(i)
            if cid is not None and draw(_ONE_IN_SIX) == 0:
                cid = None  # a result that names no call: pairs with the oldest
            events.append(
                ToolResult(
                    trace_id=trace_id,
                    ts=stamp(),
                    call_id=cid,
                    result=draw(_RESULT),
                    is_error=draw(_IS_ERROR),
                )
            )
        elif kind == "orphan":
            events.append(
                ToolResult(
                    trace_id=trace_id,
                    ts=stamp(),
                    call_id="zz",
                    result="ok",
                    is_error=draw(_pick(None, True)),
                )
            )
        elif kind == "turn":
            events.append(TurnStart(trace_id=trace_id, ts=stamp(), source="agent"))
        elif kind == "usage":
            events.append(
                Usage(
                    trace_id=trace_id,
                    ts=stamp(),
                    input_tokens=draw(_TOKENS_IN),
                    output_tokens=draw(_TOKENS_OUT),
                    cache_read_tokens=draw(_CACHE),
                )
            )
        elif kind == "error":
            events.append(AgentError(trace_id=trace_id, ts=stamp(), message="boom"))
        else:
            events.append(
                Message(trace_id=trace_id, ts=stamp(), role="assistant", text="hi")
            )
    if end is None:
        end = draw(st.booleans())
    if end:
        events.append(TraceEnd(trace_id=trace_id, ts=stamp()))
    return events


_ARGS = {name: _args(name) for name in TOOLS}


def args_for(name: str) -> st.SearchStrategy[dict[str, Any] | None]:
    """Arguments of a call to ``name``: usually its natural key, sometimes
    missing, empty, not a string, or another tool's key."""
    return _ARGS[name]


@dataclass(frozen=True)
class Stream:
    """Several traces and one interleaving of their events."""

    traces: dict[str, list[Event]]
    events: list[Event]


@st.composite
def streams(
    draw: st.DrawFn,
    *,
    max_traces: int = 3,
    max_events: int = 20,
    end: bool | None = None,
    reuse_ids: bool = True,
) -> Stream:
    """1..max_traces traces with distinct ids, interleaved keeping each one's order."""
    n = draw(_ints(1, max_traces))
    traces = {
        f"t{i}": draw(
            trace_events(f"t{i}", max_events=max_events, end=end, reuse_ids=reuse_ids)
        )
        for i in range(n)
    }
    slots = [tid for tid, evs in traces.items() for _ in evs]
    order = draw(st.permutations(slots))
    cursors = dict.fromkeys(traces, 0)
    events: list[Event] = []
    for tid in order:
        events.append(traces[tid][cursors[tid]])
        cursors[tid] += 1
    return Stream(traces=traces, events=events)


def encode_jsonl(events: list[Event]) -> bytes:
    """Canonical JSONL: one encoded event a line."""
    return b"".join(msgspec.json.encode(ev) + b"\n" for ev in events)


def sprinkled(
    data: st.DataObject, events: list[Event], odd: tuple[bytes, ...], most: int = 3
) -> bytes:
    """Canonical JSONL of ``events`` with up to ``most`` of the ``odd`` lines
    (broken, or decoded differently) put in at random places."""
    lines = encode_jsonl(events).splitlines()
    for line in data.draw(st.lists(st.sampled_from(odd), max_size=most)):
        lines.insert(data.draw(st.integers(0, len(lines))), line)
    return b"".join(line + b"\n" for line in lines)


def maybe_untimed(data: st.DataObject, events: list[Event]) -> list[Event]:
    """``events``, or (as drawn) the same without producer time: only the
    runner's clock then drives wall-time."""
    if data.draw(st.booleans(), label="no producer time"):
        return [msgspec.structs.replace(ev, ts=None) for ev in events]
    return events


@st.composite
def chunked(draw: st.DrawFn, data: bytes) -> list[bytes]:
    """``data`` cut at arbitrary byte positions (lines split across chunks)."""
    if not data:
        return [data]
    cuts = sorted(set(draw(st.lists(_ints(0, len(data)), max_size=12))))
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


# ------------------------------------------------------------------ suites
@dataclass(frozen=True)
class SuiteCase:
    """A generated config: the plain dict, its YAML text and the compiled Suite."""

    config: dict[str, Any]
    yaml_text: str
    suite: Suite

    def grader_configs(self) -> dict[str, dict[str, Any]]:
        """Grader name -> ``{type, config}`` as written."""
        return {g["name"]: g for g in self.config["graders"]}

    def __repr__(self) -> str:
        return f"SuiteCase(yaml_text={self.yaml_text!r})"


def _add_filters(draw: st.DrawFn, entry: dict[str, Any]) -> None:
    if draw(_ints(0, 3)) == 0:
        entry["command"] = draw(_pick(*COMMAND_PATTERNS))
    if draw(_ints(0, 3)) == 0:
        entry["path"] = draw(_pick(*PATH_PATTERNS))
    if draw(_ints(0, 4)) == 0:
        key = draw(_pick(*sorted(ARG_PATTERNS)))
        entry["args"] = {key: draw(_pick(*ARG_PATTERNS[key]))}


@st.composite
def _entry(draw: st.DrawFn, where: str) -> str | dict[str, Any]:
    name = draw(_pick(*NAME_PATTERNS))
    if draw(_ints(0, 3)) == 0:
        return name  # shorthand
    entry: dict[str, Any] = {"name": name}
    _add_filters(draw, entry)
    if where != "sequence" and draw(_ints(0, 2)) == 0:
        entry["result"] = draw(_pick(*RESULT_PATTERNS))
    if where == "required":
        if draw(_ints(0, 2)) == 0:
            entry["min_count"] = draw(_ints(1, 3))
        if draw(_ints(0, 3)) == 0:
            entry["final"] = draw(st.booleans())
        window = draw(_pick("none", "none", "at", "before", "both"))
        if window in ("at", "both"):
            entry["at_step"] = draw(_ints(0, 2))
        if window in ("before", "both"):
            lo = entry.get("at_step", -1) + 1
            entry["before_step"] = draw(_ints(max(lo, 1), 3))
    return entry


_ENTRY_LISTS = {
    where: st.lists(_entry(where), max_size=most)
    for where, most in (("required", 3), ("disallowed", 2), ("sequence", 3))
}


@st.composite
def tool_calls_config(draw: st.DrawFn) -> dict[str, Any]:
    """A valid ``tool-calls`` config (at least one list given)."""
    present = draw(
        st.lists(
            _pick("required", "disallowed", "sequence"),
            min_size=1,
            unique=True,
        )
    )
    return {
        where: draw(_ENTRY_LISTS[where])
        for where in ("required", "disallowed", "sequence")
        if where in present
    }


@functools.cache
def _metric() -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
    return st.one_of(
        st.tuples(
            st.just("token-budget"), st.fixed_dictionaries({"max": _ints(0, 400)})
        ),
        st.tuples(
            st.just("tool-call-count"),
            st.fixed_dictionaries({"max": _ints(0, 6)}),
        ),
        st.tuples(st.just("turn-count"), st.fixed_dictionaries({"max": _ints(0, 5)})),
        st.tuples(
            st.just("error-count"),
            st.fixed_dictionaries(
                {"max": _ints(0, 2)},
                optional={"include_tool_errors": st.booleans()},
            ),
        ),
        st.tuples(
            st.just("wall-time"),
            st.fixed_dictionaries({"max": _pick(*DURATIONS)}),
        ),
    )


@functools.cache
def _specs(
    lo: int, hi: int, metrics: bool, tool_calls: bool
) -> st.SearchStrategy[list[tuple[str, dict[str, Any]]]]:
    choices: list[st.SearchStrategy[tuple[str, dict[str, Any]]]] = []
    if tool_calls:
        choices.append(st.tuples(st.just("tool-calls"), tool_calls_config()))
    if metrics:
        choices.append(_metric())
    return st.lists(st.one_of(choices), min_size=lo, max_size=hi)


@st.composite
def suites(
    draw: st.DrawFn,
    *,
    min_graders: int = 1,
    max_graders: int = 5,
    metrics: bool = True,
    tool_calls: bool = True,
    wall_time: bool = False,
) -> SuiteCase:
    """A valid suite mixing ``tool-calls`` and metric graders, compiled from YAML
    (``wall_time``: always with one wall-time grader, for clock tests)."""
    specs = draw(_specs(min_graders, max_graders, metrics, tool_calls))
    if wall_time:
        specs = [*specs, ("wall-time", {"max": draw(_pick(*DURATIONS))})]
    config = {
        "graders": [
            {"type": kind, "name": f"g{i}", "config": cfg}
            for i, (kind, cfg) in enumerate(specs)
        ]
    }
    text = yaml.safe_dump(config, sort_keys=False)
    return SuiteCase(
        config=config, yaml_text=text, suite=compile_suite(decode_config(text))
    )
