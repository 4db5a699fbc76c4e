"""Drive a compiled guard rule by its contract, as the engine does: ``step``
(or its handler) for each event it wants, then ``judge`` for every
``tool_call``, with ``state`` None once the grader's verdict is final."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import msgspec

from trajgrade import compile_suite, decode_config
from trajgrade.events import Event, ToolCall
from trajgrade.pipeline.decoder import SourceDecoder
from trajgrade.verdicts import Decision, Judgement

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def grader(kind: str, config: str, *, on_fail: str | None = None) -> Any:
    """One compiled grader of ``kind`` from an inline YAML config mapping."""
    text = f"graders:\n  - type: {kind}\n    config: {config}\n"
    if on_fail is not None:
        text += f"    on_fail: {on_fail}\n"
    return compile_suite(decode_config(text)).graders[0]


class Run(msgspec.Struct):
    """What a grader said on one trace."""

    #: (event index, decision) for every decision step returned.
    decisions: list[tuple[int, Decision]]
    #: (event index, call, judgement) for every call judged a violation.
    judged: list[tuple[int, ToolCall, Judgement]]
    final: Decision
    state: Any = None


def drive(g: Any, events: list[Event], *, checkpoint_every: int = 0) -> Run:
    """Feed ``events`` to ``g``; with ``checkpoint_every``, the state goes
    through msgpack that often (a restart)."""
    state: Any = g.start()
    decisions: list[tuple[int, Decision]] = []
    judged: list[tuple[int, ToolCall, Judgement]] = []
    final: Decision | None = None
    for i, e in enumerate(events):
        if checkpoint_every and state is not None and i % checkpoint_every == 0:
            state = msgspec.msgpack.decode(
                msgspec.msgpack.encode(state), type=g.state_type
            )
        if state is not None and type(e) in g.event_types:
            d = g.step(state, e)
            if d is not None:
                decisions.append((i, d))
                if d.final:
                    final, state = d, None
        if type(e) is ToolCall:
            j = g.judge(state, e)
            if j is not None:
                judged.append((i, e, j))
    if final is None:
        final = g.finish(state)
    return Run(decisions=decisions, judged=judged, final=final, state=state)


def recorded(name: str) -> list[Event]:
    """The events of a real recorded log under tests/fixtures."""
    path = FIXTURES / name
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        data = gzip.decompress(data)
    dec = SourceDecoder(path.name)
    batch, end = dec.feed(data), dec.close()
    assert not batch.errors and not end.errors
    return [*batch.events, *end.events]
