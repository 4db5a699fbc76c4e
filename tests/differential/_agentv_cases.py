"""Generated agentv cases: an eval file entry (YAML text) and a CLI record.

Configs cover the five modes, argument expectations written with YAML plain
scalars that YAML 1.1 and 1.2 read differently, grader- and item-level
``args_match`` (named modes and field lists), latency limits, and minimums;
records cover ``output``/``output_messages`` (one, both, neither), every
role, inputs that are objects, strings, ``null``, numbers, arrays or
missing, per-call durations (negative too), record-level ``text`` and
``duration_ms``. trajgrade grades the same text through its public path:
``decode_config`` -> ``compile_suite`` -> ``grade_bytes`` in the ``agentv``
format, with ``agentv_compat: agentv>=2.7.1`` (the band of 4.42.4; agentv
ignores the key).
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from trajgrade.config.compile import compile_suite
from trajgrade.config.decode import decode_config
from trajgrade.pipeline.whole import grade_bytes
from trajgrade.verdicts import Outcome

MODES = ("any_order", "in_order", "exact", "superset", "subset")
TOOLS = ("a", "b", "c")
#: YAML plain scalars whose value depends on the YAML version.
SCALARS = (
    "yes", "no", "on", "off", "true", "True", "010", "0o17", "0x1F", "1_000",
    "1e3", "1:30", "2024-01-01", "null", "~", "1.0", "1", "-5", ".5", "+5", "x",
    "'yes'", '"010"',
)  # fmt: skip
#: JSON values of recorded inputs, matching one reading or the other.
VALUES = (
    "yes", True, 10, 8, 15, "0o17", 31, "1_000", 1000, "1e3", 90, "1:30",
    "2024-01-01", None, 1, -5, 0.5, 5, "x", "010", "on",
)  # fmt: skip
DURATIONS_YAML = ("100", "50", "0", "1e2", "0o144", "1_000", "-1", "45")
ARGS_MATCH = ("exact", "superset", "subset", "ignore", "[q]", "[o.x]")


@st.composite
def _args_yaml(draw: st.DrawFn) -> str | None:
    kind = draw(st.sampled_from(["none", "any", "empty", "q", "qn", "nested"]))
    s = st.sampled_from(SCALARS)
    return {
        "none": None,
        "any": "any",
        "empty": "{}",
        "q": f"{{q: {draw(s)}}}",
        "qn": f"{{q: {draw(s)}, n: {draw(s)}}}",
        "nested": f"{{o: {{x: {draw(s)}}}}}",
    }[kind]


@st.composite
def _item(draw: st.DrawFn) -> str:
    parts = [f"tool: {draw(st.sampled_from(TOOLS))}"]
    args = draw(_args_yaml())
    if args is not None:
        parts.append(f"args: {args}")
    if draw(st.booleans()):
        parts.append(f"args_match: {draw(st.sampled_from(ARGS_MATCH))}")
    if draw(st.integers(0, 2)) == 0:
        parts.append(f"max_duration_ms: {draw(st.sampled_from(DURATIONS_YAML))}")
    return "{" + ", ".join(parts) + "}"


@st.composite
def configs(draw: st.DrawFn) -> str:
    mode = draw(st.sampled_from(MODES))
    lines = [
        "execution:",
        "  evaluators:",
        "    - name: t",
        "      type: tool_trajectory",
        "      agentv_compat: agentv>=2.7.1",
        f"      mode: {mode}",
    ]
    if mode == "any_order":
        tools = draw(st.lists(st.sampled_from(TOOLS), unique=True, max_size=3))
        counts = st.sampled_from(["0", "1", "2", "1.5", "'1'"])
        body = ", ".join(f"{t}: {draw(counts)}" for t in tools)
        lines.append(f"      minimums: {{{body}}}")
    else:
        if draw(st.booleans()):
            lines.append(f"      args_match: {draw(st.sampled_from(ARGS_MATCH))}")
        items = draw(st.lists(_item(), max_size=3))
        lines.append("      expected:" if items else "      expected: []")
        lines.extend(f"        - {item}" for item in items)
    return "\n".join(lines) + "\n"


_INPUTS = st.one_of(
    st.just("<missing>"),
    st.none(),
    st.fixed_dictionaries({"q": st.sampled_from(VALUES)}),
    st.fixed_dictionaries({"q": st.sampled_from(VALUES), "n": st.sampled_from(VALUES)}),
    st.fixed_dictionaries({"o": st.fixed_dictionaries({"x": st.sampled_from(VALUES)})}),
    st.sampled_from(["", "abc", '{"q": "x"}', 5, [1], True]),
)


@st.composite
def _call(draw: st.DrawFn) -> dict[str, Any]:
    call: dict[str, Any] = {"tool": draw(st.sampled_from(TOOLS))}
    value = draw(_INPUTS)
    if value != "<missing>":
        call["input"] = value
    if draw(st.booleans()):
        call["id"] = f"c{draw(st.integers(0, 5))}"
    if draw(st.integers(0, 2)) > 0:
        call["duration_ms"] = draw(st.sampled_from([0, 45, 100, 120, -5, 1.5]))
    if draw(st.booleans()):
        call["output"] = "ok"
    if draw(st.integers(0, 30)) == 0:
        # Outside agentv's CLI record schema (a number id, a text duration, an
        # unknown status): agentv then reads the whole record as plain text.
        call.update(
            draw(st.sampled_from([{"id": 5}, {"duration_ms": "45"}, {"status": "odd"}]))
        )
    return call


@st.composite
def _message(draw: st.DrawFn) -> dict[str, Any]:
    msg: dict[str, Any] = {}
    if draw(st.integers(0, 30)) > 0:  # agentv's schema needs a role
        msg["role"] = draw(
            st.sampled_from(["assistant", "assistant", "user", "system", "tool"])
        )
    if draw(st.booleans()):
        msg["content"] = draw(st.sampled_from(["", "done", "ünïcode ✓"]))
    if draw(st.integers(0, 3)) > 0:
        msg["tool_calls"] = draw(st.lists(_call(), max_size=3))
    return msg


@st.composite
def records(draw: st.DrawFn) -> str:
    rec: dict[str, Any] = {}
    where = draw(st.sampled_from(["output", "output_messages", "both", "neither"]))
    messages = st.lists(_message(), max_size=3)
    if where in ("output", "both"):
        rec["output"] = draw(messages)
    if where in ("output_messages", "both"):
        rec["output_messages"] = draw(messages)
    if draw(st.booleans()):
        rec["text"] = draw(st.sampled_from(["done", "", 5, None]))
    if draw(st.integers(0, 3)) == 0:
        rec["duration_ms"] = draw(st.sampled_from([-3, 10]))
    return json.dumps(rec)


@st.composite
def cases(draw: st.DrawFn) -> dict[str, Any]:
    return {"config": draw(configs()), "record": draw(records())}


def trajgrade_answer(case: dict[str, Any]) -> dict[str, Any]:
    """trajgrade's final verdict for a case, in the upstream driver's shape."""
    suite = compile_suite(decode_config(case["config"], name="eval.yaml"))
    result = grade_bytes(
        suite, case["record"].encode() + b"\n", source="record.jsonl", fmt="agentv"
    )
    assert not result.errors, result.errors
    (verdict,) = [v for v in result.verdicts if v.final]
    if verdict.outcome is Outcome.ERROR:
        return {"error": verdict.evidence}
    meta = verdict.metadata
    return {
        "score": verdict.score,
        "verdict": "pass" if verdict.passed else "fail",
        "hits": meta["hits"],
        "misses": meta["misses"],
    }


def same(ours: dict[str, Any], theirs: dict[str, Any]) -> bool:
    """Score, pass/fail and every hit and miss text agree (errors: both err)."""
    if "error" in ours or "error" in theirs:
        return "error" in ours and "error" in theirs
    return (
        abs(ours["score"] - theirs["score"]) <= 1e-9
        and ours["verdict"] == theirs["verdict"]
        and ours["hits"] == theirs["hits"]
        and ours["misses"] == theirs["misses"]
    )


def _messages(case: dict[str, Any]) -> list[Any]:
    rec = json.loads(case["record"])
    chosen = rec.get("output") if isinstance(rec.get("output"), list) else None
    if chosen is None:
        chosen = rec.get("output_messages") or []
    return chosen


def _outside_schema(case: dict[str, Any]) -> bool:
    rec = json.loads(case["record"])
    for key in ("output", "output_messages"):
        for msg in rec.get(key) or []:
            if not isinstance(msg.get("role"), str):
                return True
            for call in msg.get("tool_calls") or []:
                if not isinstance(call.get("id", ""), str):
                    return True
                if not isinstance(call.get("duration_ms", 0), int | float):
                    return True
                if call.get("status", "ok") not in (
                    "ok",
                    "error",
                    "timeout",
                    "cancelled",
                    "unknown",
                ):
                    return True
    return False


#: Documented differences (docs/fidelity.md, "Remaining differences"): id ->
#: whether a case is one where the difference shows.
KNOWN: dict[str, Any] = {
    "agentv-input-roles": lambda case: (
        bool(_messages(case))
        and all(m.get("role") in ("user", "system") for m in _messages(case))
        and not any(m.get("tool_calls") for m in _messages(case))
    ),
    "agentv-record-schema": _outside_schema,
}
