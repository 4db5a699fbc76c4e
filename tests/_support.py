"""Small builders shared by unit tests (not fixtures: plain functions)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from trajgrade import Engine, Suite, compile_suite, decode_config
from trajgrade.events import Event, ToolCall, ToolResult, TraceEnd, TurnStart, Usage
from trajgrade.verdicts import Verdict


def suite(yaml_text: str) -> Suite:
    """Compile a suite from YAML config text."""
    return compile_suite(decode_config(textwrap.dedent(yaml_text), name="test.yaml"))


def one(grader_type: str, config: str) -> Suite:
    """A suite of a single grader with the given YAML config body."""
    body = textwrap.indent(textwrap.dedent(config).strip(), "      ")
    return suite(f"graders:\n  - type: {grader_type}\n    config:\n{body}\n")


def call(name: str, cid: str | None = None, trace: str = "t", **args: Any) -> ToolCall:
    return ToolCall(trace_id=trace, name=name, call_id=cid, args=args or None)


def result(
    cid: str | None, value: Any = "ok", trace: str = "t", *, error: bool | None = None
) -> ToolResult:
    return ToolResult(trace_id=trace, call_id=cid, result=value, is_error=error)


def turn(trace: str = "t") -> TurnStart:
    return TurnStart(trace_id=trace)


def usage(inp: int, out: int, trace: str = "t") -> Usage:
    return Usage(trace_id=trace, input_tokens=inp, output_tokens=out)


def end(trace: str = "t") -> TraceEnd:
    return TraceEnd(trace_id=trace)


def run(s: Suite, events: list[Event]) -> list[tuple[int, Verdict]]:
    """Feed events; return (index of the event after which it came, verdict);
    index len(events) means end of input."""
    engine = Engine(s)
    out = [(i, v) for i, ev in enumerate(events) for v in engine.feed(ev)]
    out += [(len(events), v) for v in engine.finish()]
    return out


def finals(s: Suite, events: list[Event]) -> dict[tuple[str, str], Verdict]:
    """The final verdict per (trace, grader)."""
    return {(v.trace_id, v.grader): v for _, v in run(s, events) if v.final}


def converted(paths: list[Path]) -> bytes:
    """The canonical events ``trajgrade convert`` reads these logs as (the
    real CLI, in a subprocess), for hosts fed canonical records."""
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-m", "trajgrade", "convert", *map(str, paths)],
        capture_output=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(root / "src")},
        timeout=120,
    )
    return done.stdout
