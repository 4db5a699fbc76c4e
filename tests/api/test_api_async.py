"""The async helpers under cancellation, failing sources and slow consumers:
nothing already fed is lost, errors come out as they are, the grader stays
usable, and items are read only as fast as verdicts are taken."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import anyio
import anyio.lowlevel
import msgspec
import pytest

from trajgrade import Event, StreamGrader, ToolCall, TraceEnd, Usage, Verdict

pytestmark = pytest.mark.anyio

#: Two graders that fail on the same call: one item, two verdicts.
POLICY = """\
graders:
  - {type: tool-calls, name: no-rm, config: {disallowed: [{name: bash, command: rm}]}}
  - {type: tool-calls, name: no-rm-either, config: {disallowed: [{name: bash, command: rm}]}}
  - {type: token-budget, name: tokens, config: {max: 100}}
"""
EVENTS: list[Event] = [
    ToolCall(trace_id="t", name="bash", call_id="c1", args={"command": "rm -rf /"}),
    Usage(trace_id="t", input_tokens=500),
    TraceEnd(trace_id="t"),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _alone(events: list[Event] = EVENTS) -> list[Verdict]:
    grader = StreamGrader.from_text(POLICY)
    return [v for ev in events for v in grader.feed(ev)] + grader.finish()


async def _items(events: list[Any], then_wait: bool = False) -> AsyncIterator[Any]:
    for ev in events:
        yield ev
    if then_wait:
        await anyio.sleep_forever()


async def test_cancelled_between_two_verdicts_of_one_item() -> None:
    """Cancelled while handling the first verdict of an item, the stream
    keeps the second for take_undelivered (it used to be lost)."""
    grader = StreamGrader.from_text(POLICY)
    got: list[Verdict] = []
    with anyio.CancelScope() as scope:
        async with aclosing(grader.grade_stream(_items(EVENTS))) as stream:
            async for v in stream:
                got.append(v)
                scope.cancel()
                await anyio.lowlevel.checkpoint()
    assert [v.grader for v in got] == ["no-rm"]
    got += grader.take_undelivered()
    got += [v async for v in grader.grade_stream(_items(EVENTS[1:]))]
    assert got == _alone()
    assert grader.take_undelivered() == []


async def test_streams_of_two_sources_at_once_keep_their_verdicts_apart() -> None:
    """Two streams on one grader (one per agent) each yield their own
    items' verdicts, however they interleave."""
    grader = StreamGrader.from_text(POLICY)
    got: dict[str, list[Verdict]] = {"a": [], "b": []}

    async def consume(source: str) -> None:
        events = [msgspec.structs.replace(ev, trace_id=source) for ev in EVENTS]
        async for v in grader.grade_stream(_items(events), source=source, finish=False):
            got[source].append(v)
            await anyio.sleep(0.001)  # a slow consumer: the other one runs

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume, "a")
        tg.start_soon(consume, "b")
    for source in ("a", "b"):
        want = [msgspec.structs.replace(v, trace_id=source) for v in _alone()]
        assert [(v.trace_id, v.grader, v.outcome) for v in got[source]] == [
            (v.trace_id, v.grader, v.outcome) for v in want
        ]


async def test_cancelled_while_the_source_is_idle() -> None:
    """Cancelled while waiting for the next item, everything fed so far
    stands; the grader carries on with a new stream."""
    grader = StreamGrader.from_text(POLICY)
    got: list[Verdict] = []
    with anyio.move_on_after(0.2):
        async for v in grader.grade_stream(_items(EVENTS[:1], then_wait=True)):
            got.append(v)  # noqa: PERF401 (what came before the cancel)
    assert grader.engine.open_traces() == ["t"]
    got += [v async for v in grader.grade_stream(_items(EVENTS[1:]))]
    assert got == _alone()


async def test_callback_cancelled_keeps_what_it_did_not_get() -> None:
    """grade_stream_to cancelled inside on_verdict: the verdicts not handed
    over are kept (take_undelivered), none is lost."""
    grader = StreamGrader.from_text(POLICY)
    got: list[Verdict] = []
    with anyio.CancelScope() as scope:

        async def on_verdict(v: Verdict) -> None:
            got.append(v)
            scope.cancel()
            await anyio.lowlevel.checkpoint()

        await grader.grade_stream_to(_items(EVENTS), on_verdict)
    assert [v.grader for v in got] == ["no-rm"]
    got += grader.take_undelivered()
    assert grader.take_undelivered() == []
    got += [v for ev in EVENTS[1:] for v in grader.feed(ev)] + grader.finish()
    assert got == _alone()


async def test_a_failing_source_raises_its_own_error() -> None:
    """The source's exception comes out of grade_stream_to as it is (it
    came wrapped in an ExceptionGroup); what was fed stays graded."""

    async def broken() -> AsyncIterator[Any]:
        yield EVENTS[0]
        raise OSError("pipe broke")

    grader = StreamGrader.from_text(POLICY)
    got: list[Verdict] = []
    with pytest.raises(OSError, match="pipe broke"):
        await grader.grade_stream_to(broken(), got.append)
    streamed: list[Verdict] = []
    with pytest.raises(OSError, match="pipe broke"):  # noqa: PT012 (an async for)
        async for v in StreamGrader.from_text(POLICY).grade_stream(broken()):
            streamed.append(v)  # noqa: PERF401
    assert [v.grader for v in streamed] == ["no-rm", "no-rm-either"]
    got += [v for ev in EVENTS[1:] for v in grader.feed(ev)] + grader.finish()
    assert got == _alone()


async def test_a_failing_callback_on_the_clock_raises_its_own_error() -> None:
    """on_verdict raising for a verdict the wall-time clock decided (while
    the source is idle) stops the stream with that error, unwrapped."""
    grader = StreamGrader.from_text(
        "graders:\n  - {type: wall-time, config: {max: 10ms}}\n"
    )

    def on_verdict(v: Verdict) -> None:
        raise ValueError(f"cannot handle {v.outcome}")

    with anyio.fail_after(10), pytest.raises(ValueError, match="cannot handle fail"):
        await grader.grade_stream_to(
            _items([ToolCall(trace_id="t", name="ls")], then_wait=True),
            on_verdict,
            tick_interval=0.005,
        )


async def test_items_are_read_only_as_verdicts_are_taken() -> None:
    """Backpressure: the next item is read after the last verdict was taken."""
    read: list[int] = []

    async def counted() -> AsyncIterator[Any]:
        for i, ev in enumerate(EVENTS):
            read.append(i)
            yield ev

    grader = StreamGrader.from_text(POLICY)
    seen = [(v.grader, len(read)) async for v in grader.grade_stream(counted())]
    assert seen == [("no-rm", 1), ("no-rm-either", 1), ("tokens", 2)]
    assert read == [0, 1, 2]


@pytest.mark.parametrize("interval", [0, -1.0, float("nan")])
async def test_a_clock_that_would_spin_is_refused(interval: float) -> None:
    """tick_interval 0 (or below, or NaN) made the clock a busy loop."""
    grader = StreamGrader.from_text(POLICY)
    with pytest.raises(ValueError, match="tick_interval must be a positive number"):
        await grader.grade_stream_to(_items(EVENTS), print, tick_interval=interval)


def _rm(trace: str, cid: str, command: str = "rm -rf /") -> ToolCall:
    return ToolCall(trace_id=trace, name="bash", call_id=cid, args={"command": command})


def _line(event: Event) -> bytes:
    return msgspec.json.encode(event) + b"\n"


@pytest.mark.parametrize("mode", ["stream", "callback"])
@pytest.mark.parametrize("as_bytes", [False, True])
async def test_a_stream_that_ends_first_leaves_the_others_traces_open(
    mode: str, as_bytes: bool
) -> None:
    """Two agents on one grader, one stream each: the first to end used to
    finish every open trace, so the other agent's later `rm -rf /` was
    dropped as a late event (no verdict, no guard decision). Now its end
    ends only its own traces; a trace both had fed stays open for the other."""
    grader = StreamGrader.from_text(POLICY)
    a_done = anyio.Event()
    got: dict[str, list[Verdict]] = {"a": [], "b": []}
    a_items: list[Any] = [_rm("a", "c1"), _rm("shared", "c1", "ls")]
    b_items: list[Any] = [
        _rm("shared", "c0", "ls"),
        _rm("b", "c2"),
        _rm("shared", "c2"),
    ]
    if as_bytes:  # raw chunks; a's last line has no newline (its end flushes it)
        a_items = [b"".join(_line(e) for e in a_items)[:-1]]
        b_items = [_line(e) for e in b_items]

    async def items(name: str) -> AsyncIterator[Any]:
        source = a_items if name == "a" else b_items
        for k, item in enumerate(source):
            if name == "b" and k == 1:
                await a_done.wait()  # b goes on after a's stream has ended
            yield item

    async def run(name: str) -> None:
        if mode == "stream":
            async for v in grader.grade_stream(items(name), source=name):
                got[name].append(v)
        else:
            await grader.grade_stream_to(items(name), got[name].append, source=name)
        if name == "a":
            a_done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, "b")
        tg.start_soon(run, "a")
    decided = {(d.trace_id, d.call_id) for d in grader.take_decisions()}
    assert decided == {("a", "c1"), ("b", "c2"), ("shared", "c2")}
    assert {v.trace_id for v in got["a"]} == {"a"}
    assert {v.trace_id for v in got["b"]} == {"b", "shared"}
    failed = {(v.trace_id, v.grader) for v in got["b"] if v.outcome == "fail"}
    assert failed == {
        (t, g) for t in ("b", "shared") for g in ("no-rm", "no-rm-either")
    }
    assert grader.engine.statistics().late_events == 0
    assert grader.engine.open_traces() == [] and grader.errors == []


async def test_a_source_that_is_not_a_str_is_refused_before_the_first_item() -> None:
    grader = StreamGrader.from_text(POLICY)
    read: list[Any] = []

    async def items() -> AsyncIterator[Any]:
        read.append(EVENTS[0])
        yield EVENTS[0]

    with pytest.raises(TypeError, match="source must be a str"):
        async for _ in grader.grade_stream(items(), source=5):  # type: ignore[arg-type]
            pass
    with pytest.raises(TypeError, match="source must be a str"):
        await grader.grade_stream_to(items(), print, source=5)  # type: ignore[arg-type]
    assert read == [] and grader.finish() == []
