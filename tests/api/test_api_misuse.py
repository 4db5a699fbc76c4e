"""The embedding API used carelessly: every misuse is a typed error naming
what is wrong and the fix, or a bad record handled as the CLI handles one;
none crashes a grader or changes another trace's verdicts."""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import json
import threading
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trajgrade import (
    ConcurrentUseError,
    ConfigError,
    Engine,
    Event,
    InputError,
    Outcome,
    StateError,
    StreamGrader,
    ToolCall,
    Usage,
    Verdict,
    grade_bytes,
)
from trajgrade._util.sealed import seal, unseal
from trajgrade.events import checked

POLICY = """\
graders:
  - type: tool-calls
    name: no-rm
    config:
      disallowed: [{name: bash, command: rm}]
  - {type: token-budget, name: tokens, config: {max: 1000}}
  - {type: loop, name: loop, config: {repeats: 3}}
"""

#: Events a caller may build with the wrong field types (msgspec does not
#: check them in code), and the field each error must name. Before the
#: check: a crash (name None, a list id), a trace id that made every later
#: finish() raise, a grader "bug" verdict, or a NaN silently accepted.
BAD: list[tuple[Any, str]] = [
    (ToolCall(trace_id="a", name="bash", call_id="c", args="rm -rf /"), "args"),  # type: ignore[arg-type]
    (ToolCall(trace_id="a", name=None, call_id="c"), "name"),  # type: ignore[arg-type]
    (ToolCall(trace_id=5, name="bash", call_id="c"), "trace_id"),  # type: ignore[arg-type]
    (ToolCall(trace_id="a", name=["bash"], call_id="c"), "name"),  # type: ignore[arg-type]
    (ToolCall(trace_id="a", name="bash", call_id=[1]), "call_id"),  # type: ignore[arg-type]
    (ToolCall(trace_id="a", name="bash", ts=float("nan")), "ts"),
    (ToolCall(trace_id="a", name="bash", args={1: "rm"}), "args"),  # type: ignore[dict-item]
    (Usage(trace_id="a", input_tokens="5"), "input_tokens"),  # type: ignore[arg-type]
    (Usage(trace_id="a", cost_usd=float("inf")), "cost_usd"),
]
NOT_JSON = ToolCall(trace_id="a", name="bash", args={"command": object()})

#: Another trace's events, which a bad event must not disturb.
OTHER: list[Event] = [
    ToolCall(trace_id="b", name="bash", call_id="c1", args={"command": "ls"}),
    ToolCall(trace_id="b", name="bash", call_id="c2", args={"command": "rm x"}),
    Usage(trace_id="b", input_tokens=10, output_tokens=5),
]


def _key(verdicts: list[Verdict]) -> list[tuple[Any, ...]]:
    return [(v.trace_id, v.grader, v.outcome, v.final, v.evidence) for v in verdicts]


def _alone() -> list[Verdict]:
    grader = StreamGrader.from_text(POLICY)
    return [v for ev in OTHER for v in grader.feed(ev)] + grader.finish()


@pytest.mark.parametrize(("event", "field"), [*BAD, (NOT_JSON, "args.command")])
def test_a_badly_built_event_is_a_bad_record(event: Any, field: str | None) -> None:
    """StreamGrader.feed keeps it in errors (naming the field and the fix),
    taints its trace, and the other trace's verdicts do not change."""
    grader = StreamGrader.from_text(POLICY)
    got = grader.feed(OTHER[0])
    assert grader.feed(event) == []
    got += [v for ev in OTHER[1:] for v in grader.feed(ev)]
    grader.checkpoint()  # still plain data
    got += grader.finish()
    [err] = grader.errors
    assert isinstance(err, InputError)
    assert err.location.field == field and err.location.file == "<api>"
    assert "build events with the field types" in err.message or (
        "a value JSON cannot hold" in err.message
    )
    assert _key([v for v in got if v.trace_id == "b"]) == _key(_alone())
    tainted = "<api>" if event.trace_id == 5 else "a"
    lost = [v for v in got if v.trace_id == tainted]
    assert lost and {v.outcome for v in lost} == {Outcome.ERROR}
    assert all("events of this trace were lost" in v.evidence for v in lost)


@pytest.mark.parametrize(("event", "field"), BAD)
def test_engine_feed_checks_events_built_in_code(event: Any, field: str) -> None:
    """Engine.feed (and feed_all) never raise for such an event: an
    invalid_event anomaly names it, its trace ends in error, the engine stays
    whole (a trace id 5 used to make every later finish() raise)."""
    for use_all in (False, True):
        engine = Engine(StreamGrader.from_text(POLICY).suite)
        events = [OTHER[0], event, *OTHER[1:]]
        if use_all:
            got = engine.feed_all(events)
        else:
            got = [v for ev in events for v in engine.feed(ev)]
        got += engine.finish()
        [anomaly] = [a for a in engine.anomalies if a.kind == "invalid_event"]
        assert f".{field}: " in anomaly.message
        assert _key([v for v in got if v.trace_id == "b"]) == _key(_alone())
        assert {v.outcome for v in got if v.trace_id != "b"} == {Outcome.ERROR}


def test_a_subclass_of_an_event_is_graded_as_its_class() -> None:
    """A caller's subclass (extra fields) is graded as the event it extends
    (the engine routes by exact class: it used to be a KeyError)."""

    class Tagged(Usage, frozen=True):
        tag: str = ""

    engine = Engine(StreamGrader.from_text(POLICY).suite)
    [v] = engine.feed(Tagged(trace_id="t", input_tokens=2000, tag="x"))
    assert (v.grader, v.outcome) == ("tokens", Outcome.FAIL)


def test_what_is_not_an_event_is_a_type_error_naming_the_fix() -> None:
    """A mapping, None or a str given to Engine.feed is a programming error."""
    engine = Engine(StreamGrader.from_text(POLICY).suite)
    for wrong in ({"type": "tool_call", "name": "bash"}, None, "x"):
        with pytest.raises(
            TypeError, match=r"is not an event; build one of .*StreamGrader.feed"
        ):
            engine.feed(wrong)  # type: ignore[arg-type]
    assert engine.statistics().events == 0


def test_feed_bytes_refuses_text_naming_the_fix() -> None:
    """str is not a chunk of bytes: say so (it was 'can't concat str to bytes')."""
    grader = StreamGrader.from_text(POLICY)
    with pytest.raises(
        TypeError, match=r"feed_bytes\(\) takes bytes .*chunk\.encode\(\)"
    ):
        grader.feed_bytes('{"type": "tool_call", "name": "bash"}\n')  # type: ignore[arg-type]
    assert grader.feed_bytes(bytearray(b'{"type":"usage","input_tokens":2000}\n'))


def test_events_without_a_trace_id_go_to_their_source() -> None:
    """An event with no trace id belongs to the ``source`` it is fed for, as
    a line of that source does (it went to the grader's own source)."""
    grader = StreamGrader.from_text(POLICY)
    [v] = grader.feed(Usage(input_tokens=2000), source="agent-1")
    [w] = grader.feed(b'{"type":"usage","input_tokens":2000}', source="agent-2")
    assert (v.trace_id, w.trace_id) == ("agent-1", "agent-2")


# ------------------------------------------------------------------ lifecycle
def test_finish_twice_and_feeding_after_finish() -> None:
    """finish() again gives nothing; a finished trace is not reopened (its
    late events are dropped, counted); a new trace is graded as usual."""
    grader = StreamGrader.from_text(POLICY)
    grader.feed(OTHER[0])
    assert {v.trace_id for v in grader.finish()} == {"b"}
    assert grader.finish() == []
    assert grader.feed(OTHER[1]) == []
    stats = grader.engine.statistics()
    assert stats.events == 2 and stats.late_events + stats.settled_events == 1
    [v] = grader.feed(
        ToolCall(trace_id="new", name="bash", call_id="c", args={"command": "rm"})
    )
    assert (v.trace_id, v.outcome) == ("new", Outcome.FAIL)


def _checkpoint_mid_stream() -> bytes:
    grader = StreamGrader.from_text(POLICY)
    grader.feed(OTHER[0])
    return grader.checkpoint()


def test_restore_refuses_what_is_not_this_policys_checkpoint() -> None:
    """Truncated or garbage bytes, another format version, another policy:
    a typed error naming it, and the grader is left as it was."""
    saved = _checkpoint_mid_stream()
    _, fingerprint, engine = msgspec.msgpack.decode(unseal(saved))
    grader = StreamGrader.from_text(POLICY)
    for data in (saved[: len(saved) // 2], b"", b"\xc1", msgspec.msgpack.encode([1])):
        with pytest.raises(InputError, match="not a StreamGrader checkpoint"):
            grader.restore(data)
    future = seal(msgspec.msgpack.encode([3, fingerprint, {"a": "new layout"}]))
    with pytest.raises(
        InputError,
        match="checkpoint format version 3, and this trajgrade reads version 2",
    ):
        grader.restore(future)
    # Version 1 (no checksum) is refused, saying so.
    with pytest.raises(InputError, match="version 1 has no checksum"):
        grader.restore(msgspec.msgpack.encode([1, fingerprint, engine]))
    other = seal(msgspec.msgpack.encode([2, "0" * 16, engine]))
    with pytest.raises(ConfigError, match="taken with another policy"):
        grader.restore(other)
    with pytest.raises(
        TypeError, match=r"takes the bytes checkpoint\(\) gave, not a str"
    ):
        grader.restore(saved.decode("latin-1"))  # type: ignore[arg-type]
    grader.restore(saved)  # still fresh: the refused ones changed nothing
    got = [v for ev in OTHER[1:] for v in grader.feed(ev)] + grader.finish()
    assert _key(got) == _key(_alone())


def test_restore_into_a_grader_with_state_of_its_own_is_refused() -> None:
    """Loading a checkpoint over traces already graded would mix two
    streams' states: StateError, naming the fix (it merged them)."""
    saved = _checkpoint_mid_stream()
    for warm_up in (
        lambda g: g.feed(Usage(trace_id="x", input_tokens=1)),
        lambda g: g.feed_bytes(b'{"type": "usa', source="cut"),  # a partial line
        lambda g: g.feed(b"not json"),  # only a rejected record
    ):
        grader = StreamGrader.from_text(POLICY)
        warm_up(grader)
        with pytest.raises(
            StateError, match="build a new StreamGrader of the same policy"
        ):
            grader.restore(saved)


def test_decisions_of_a_grader_that_does_not_guard() -> None:
    """Decisions pile up until taken; a caller that never reads them builds
    the grader with guarding=False: same verdicts, no decisions kept."""
    events = [*OTHER, *OTHER[1:2] * 3]
    quiet = StreamGrader.from_text(POLICY, guarding=False)
    loud = StreamGrader.from_text(POLICY)
    got = [v for ev in events for v in quiet.feed(ev)] + quiet.finish()
    want = [v for ev in events for v in loud.feed(ev)] + loud.finish()
    assert got == want
    assert quiet.decisions == [] and len(loud.take_decisions()) == 6
    assert loud.decisions == []


# ------------------------------------------------------------------ threads
class _Rows(Mapping[str, Any]):
    """Dataset rows that block the first lookup until released: a call that
    is still running inside the engine, deterministically."""

    def __init__(self) -> None:
        self.inside = threading.Event()
        self.release = threading.Event()

    def _lookup(self) -> None:
        if not self.inside.is_set():
            self.inside.set()
            assert self.release.wait(10)

    def __contains__(self, key: object) -> bool:
        self._lookup()
        return False

    def __getitem__(self, key: str) -> Any:
        self._lookup()
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def test_two_threads_on_one_stream_grader_fail_loudly() -> None:
    """A StreamGrader is one stream's state: a second thread calling it
    while a call runs gets ConcurrentUseError (naming the fix) instead of
    corrupting it; the running call finishes as if alone."""
    rows = _Rows()
    grader = StreamGrader.from_text(POLICY, samples=rows)
    first: list[Verdict] = []
    worker = threading.Thread(
        target=lambda: first.extend(grader.feed(Usage(trace_id="t", input_tokens=2000)))
    )
    worker.start()
    assert rows.inside.wait(10)
    for call in (
        lambda: grader.feed(OTHER[0]),
        lambda: grader.feed_bytes(b"{}\n"),
        grader.finish,
        grader.checkpoint,
        grader.take_decisions,
        lambda: grader.tick(0.0),
    ):
        with pytest.raises(
            ConcurrentUseError, match="give each thread its own StreamGrader"
        ):
            call()
    rows.release.set()
    worker.join()
    assert [(v.grader, v.outcome) for v in first] == [("tokens", Outcome.FAIL)]
    assert grader.engine.open_traces() == ["t"]
    assert {v.trace_id for v in grader.finish()} == {"t"}


def test_closing_a_source_lets_its_reader_go() -> None:
    """A service with a source per connection closes each one: its partial
    line is graded and its reader dropped (they piled up until finish())."""
    grader = StreamGrader.from_text(POLICY)
    for i in range(100):
        grader.feed_bytes(b'{"type": "usage", "input_tokens": 2000}', source=f"c{i}")
        [v] = grader.close_source(f"c{i}")
        assert (v.trace_id, v.grader, v.outcome) == (f"c{i}", "tokens", Outcome.FAIL)
    assert grader.close_source("never-seen") == []
    assert grader._decoders == {}


def test_lone_surrogates_are_read_as_in_a_log_line() -> None:
    """A record holding a lone surrogate (json.loads of a line a Node agent
    wrote) is graded with U+FFFD in its place, as the CLI reads that line:
    feed() raised UnicodeEncodeError, and as a stream's first record the
    escape made auto-detection give up ("cannot tell the log format")."""
    record = {"type": "tool_call", "name": "bash", "args": {"command": "rm \ud800"}}
    line = b'{"type": "tool_call", "name": "bash", "args": {"command": "rm \\ud800"}}\n'
    assert grade_bytes(StreamGrader.from_text(POLICY).suite, line).verdicts
    for item in (record, json.dumps(record), json.dumps(record, ensure_ascii=False)):
        grader = StreamGrader.from_text(POLICY)
        [v] = grader.feed(item)
        assert (v.grader, v.outcome) == ("no-rm", Outcome.FAIL)
        assert grader.errors == []


@pytest.mark.parametrize("now", [float("nan"), float("inf"), "12", True])
def test_a_clock_reading_that_is_not_a_time_is_refused(now: Any) -> None:
    """tick(NaN) stopped every wall-time budget for good, tick(inf) crashed
    the deadline heap, a str a later tick: now they raise, naming the fix."""
    grader = StreamGrader.from_text(
        "graders:\n  - {type: wall-time, config: {max: 1s}}\n"
    )
    grader.feed(Usage(trace_id="t", input_tokens=1))
    with pytest.raises(ValueError, match=r"finite number of seconds .*time\.time\(\)"):
        grader.tick(now)
    with pytest.raises(ValueError, match="finite number of seconds"):
        grader.engine.feed(Usage(trace_id="t"), now=now)
    [v] = grader.tick(10**10)
    assert (v.grader, v.outcome) == ("wall-time", Outcome.FAIL)


def test_a_checkpoint_that_breaks_half_way_changes_nothing() -> None:
    """Bytes with a valid header whose second trace is broken are refused
    whole: the first trace is not left loaded (it was), and grader.engine
    stays the engine the caller holds."""
    grader = StreamGrader.from_text(POLICY)
    for tid in ("t", "u"):
        grader.feed(
            ToolCall(trace_id=tid, name="bash", call_id="c", args={"command": "ls"})
        )
    version, fingerprint, (traces, closed, unopened) = msgspec.msgpack.decode(
        unseal(grader.checkpoint())
    )
    for states in ([b"zz", None, None], [None] * 4):
        traces[1][6] = states  # the second trace's grader states
        data = seal(
            msgspec.msgpack.encode([version, fingerprint, [traces, closed, unopened]])
        )
        fresh = StreamGrader.from_text(POLICY)
        engine = fresh.engine
        with pytest.raises(InputError, match="not a StreamGrader checkpoint"):
            fresh.restore(data)
        assert fresh.engine is engine and engine.open_traces() == []


def test_options_a_typo_would_break_are_refused_when_built() -> None:
    """An unknown format made every feed() raise; a None source broke at
    the first event; a max_line_bytes below 1 refused every line silently."""
    with pytest.raises(
        ConfigError, match=r"unknown input format 'jsonl'; known formats: .*claude-code"
    ):
        StreamGrader.from_text(POLICY, fmt="jsonl")
    with pytest.raises(TypeError, match="source must be a non-empty str"):
        StreamGrader.from_text(POLICY, source=None)
    for bad in (0, -5, 1.5):
        with pytest.raises(ValueError, match="max_line_bytes must be a positive int"):
            StreamGrader.from_text(POLICY, max_line_bytes=bad)
    assert StreamGrader.from_text(POLICY, fmt="claude-code", source="cc")


def test_record_errors_name_the_library_options_not_cli_flags() -> None:
    """A library caller is told about fmt= and max_line_bytes= (the errors
    said "pass --format", a flag it has no way to pass)."""
    grader = StreamGrader.from_text(POLICY, max_line_bytes=64)
    grader.feed({"foo": 1})
    grader.feed(b'{"type": "usage", "input_tokens": 1, "model": "' + b"m" * 80 + b'"}')
    assert [e.message.split("; ")[-1] for e in grader.errors] == [
        "give StreamGrader its fmt= (the names: `trajgrade formats`)",
        "raise StreamGrader's max_line_bytes= if such records are expected",
    ]


# ------------------------------------------------------------------ JSON values
class Colour(enum.StrEnum):
    RED = "red"


#: JSON values as Python may hold them: tuples for arrays, str enums.
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
    | st.just(Colour.RED),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=12,
)

#: Python values a log line cannot hold. msgspec writes several as something
#: else (bytes and memoryview as base64 text, a datetime, UUID or Decimal as a
#: string, a nested NaN as null), so `rm -rf /` given as bytes in a mapping
#: was graded as "cm0gLXJmIC8=" and passed; built into an event, they reached
#: the graders as they were.
NOT_LINE_VALUES: list[tuple[Any, str]] = [
    ({"command": b"rm -rf /"}, "args.command"),
    ({"command": memoryview(b"rm -rf /")}, "args.command"),
    ({"command": "rm", "when": dt.datetime(2025, 1, 1, tzinfo=dt.UTC)}, "args.when"),
    ({"command": "rm", "id": uuid.UUID(int=1)}, "args.id"),
    ({"command": "rm", "n": decimal.Decimal("1.5")}, "args.n"),
    ({"command": "rm", "flags": {"-r", "-f"}}, "args.flags"),
    ({"command": "rm", "opts": {"x": [1, float("nan")]}}, "args.opts.x[1]"),
    ({"command": "rm", "opts": {"x": {1: "y"}}}, "args.opts.x"),
]


@pytest.mark.parametrize("as_mapping", [False, True])
@pytest.mark.parametrize(("args", "field"), NOT_LINE_VALUES)
def test_values_a_line_cannot_hold_are_refused_at_their_path(
    args: dict[str, Any], field: str, as_mapping: bool
) -> None:
    """Built into an event or a mapping: a bad record naming the value's
    path, its trace tainted; the call is never graded as something else
    (a pass), and the grader goes on with other traces."""
    grader = StreamGrader.from_text(POLICY)
    call = {"trace_id": "a", "name": "bash", "call_id": "c", "args": args}
    if as_mapping:
        got = grader.feed({"type": "tool_call", **call})
    else:
        got = grader.feed(ToolCall(**call))
    assert got == [] and grader.take_decisions() == []
    [err] = grader.errors
    assert err.location.field == field and err.trace_id == "a"
    assert "give values JSON can hold" in err.message
    got = [v for ev in OTHER for v in grader.feed(ev)] + grader.finish()
    assert _key([v for v in got if v.trace_id == "b"]) == _key(_alone())
    assert {v.outcome for v in got if v.trace_id == "a"} == {Outcome.ERROR}


@given(value=JSON_VALUES)
def test_an_event_holding_json_values_is_graded_as_its_line(value: Any) -> None:
    """Whatever JSON values (tuples and str/int enums included) an event
    built in code holds, the graders see what its JSON line decodes to."""
    event = ToolCall(trace_id="t", name="bash", args={"v": value})
    line = msgspec.json.encode(event)
    assert checked(event) == msgspec.json.decode(line, type=ToolCall)


@given(value=JSON_VALUES, bad=st.sampled_from([b"x", {1}, float("inf"), object()]))
def test_a_value_no_line_holds_is_named_wherever_it_is(value: Any, bad: Any) -> None:
    """One such value anywhere (under any nesting) is an InputError naming
    its path."""
    event = ToolCall(trace_id="t", name="bash", args={"v": [value, {"k": bad}]})
    with pytest.raises(InputError) as caught:
        checked(event)
    assert caught.value.location.field == "args.v[1].k"


@pytest.mark.parametrize("source", [5, b"agent-1", ("a",)])
def test_a_source_that_is_not_a_str_is_refused_before_anything_is_fed(
    source: Any,
) -> None:
    """A connection number as ``source`` opened a trace whose id was an int:
    every later finish() raised AttributeError (all final verdicts lost)."""
    grader = StreamGrader.from_text(POLICY)
    first = grader.feed(OTHER[0])
    feeds = [
        lambda: grader.feed(Usage(input_tokens=5), source=source),
        lambda: grader.feed({"type": "usage", "input_tokens": 5}, source=source),
        lambda: grader.feed_bytes(b'{"type":"usage"}\n', source=source),
        lambda: grader.close_source(source),
    ]
    for feed in feeds:
        with pytest.raises(TypeError, match=r"source must be a str .* got "):
            feed()
    got = [v for ev in OTHER[1:] for v in grader.feed(ev)] + grader.finish()
    assert grader.errors == [] and grader.engine.statistics().events == len(OTHER)
    assert _key(first + got) == _key(_alone())


def _aborted_checkpoint() -> bytes:
    """Two traces, one aborted (a blown token budget) and one with a call open."""
    grader = StreamGrader.from_text(POLICY)
    grader.feed(Usage(trace_id="t", input_tokens=2000))
    grader.feed(
        ToolCall(trace_id="u", name="bash", call_id="c", args={"command": "ls"})
    )
    return grader.checkpoint()


SAVED = _aborted_checkpoint()


@given(
    edits=st.lists(
        st.tuples(st.integers(0, len(SAVED) - 1), st.integers(0, 255)), max_size=4
    ),
    cut=st.integers(0, len(SAVED)),
)
def test_a_corrupted_checkpoint_is_refused_or_restores_a_working_grader(
    edits: list[tuple[int, int]], cut: int
) -> None:
    """Bytes flipped or cut anywhere: an InputError/ConfigError that changes
    nothing (a flipped byte in a string was a UnicodeDecodeError), or a
    grader that grades, guards and finishes (an abort naming a grader the
    policy lacks passed, then an IndexError came out of a later feed)."""
    data = bytearray(SAVED[:cut])
    for at, byte in edits:
        if at < len(data):
            data[at] = byte
    grader = StreamGrader.from_text(POLICY)
    try:
        grader.restore(bytes(data))
    except (InputError, ConfigError):
        assert grader.engine.open_traces() == []
        return
    for tid in ("t", "u", "v"):
        grader.feed(
            ToolCall(trace_id=tid, name="bash", call_id="k", args={"command": "rm x"})
        )
    assert {d.call_id for d in grader.take_decisions()} >= {"k"}
    grader.checkpoint()
    grader.finish()


def test_an_abort_naming_a_grader_the_policy_lacks_is_refused() -> None:
    version, fingerprint, (traces, closed, unopened) = msgspec.msgpack.decode(
        unseal(SAVED)
    )
    [aborted] = [t for t in traces if t[9] is not None]
    aborted[9][0] = 99
    data = seal(
        msgspec.msgpack.encode([version, fingerprint, [traces, closed, unopened]])
    )
    grader = StreamGrader.from_text(POLICY)
    with pytest.raises(InputError, match="its abort names grader 99 of 3"):
        grader.restore(data)
    assert grader.engine.open_traces() == []


# ------------------------------------------------------------------ grade_bytes
RM_LINE = b'{"trace_id":"t","type":"tool_call","name":"bash","call_id":"c","args":{"command":"rm -rf /"}}\n'


def test_grade_bytes_takes_any_bytes_like_input_and_refuses_text() -> None:
    """A bytearray or memoryview (what a socket or mmap gives) crashed with
    "can't concat int to bytes"; text is a TypeError naming the fix."""
    suite = StreamGrader.from_text(POLICY).suite
    want = _key(grade_bytes(suite, RM_LINE).verdicts)
    assert want and {v[2] for v in want} >= {Outcome.FAIL}
    for data in (
        bytearray(RM_LINE),
        memoryview(RM_LINE),
        [RM_LINE[:9], memoryview(RM_LINE[9:])],
        iter([bytearray(RM_LINE)]),
    ):
        assert _key(grade_bytes(suite, data).verdicts) == want  # type: ignore[arg-type]
    for text, what in (
        (RM_LINE.decode(), "not a str"),
        ([RM_LINE.decode()], "chunk 0"),
    ):
        with pytest.raises(TypeError, match=rf"grade_bytes\(\) .*{what}.*encode"):
            grade_bytes(suite, text)  # type: ignore[arg-type]


def test_grade_bytes_refuses_options_a_typo_would_break() -> None:
    """As StreamGrader does: max_line_bytes=0 skipped every line (every
    trace in error), source=None and fmt="jsonl" failed at the first record;
    its record errors name its own options, not the CLI's flags."""
    suite = StreamGrader.from_text(POLICY).suite
    with pytest.raises(ConfigError, match=r"unknown input format 'jsonl'"):
        grade_bytes(suite, RM_LINE, fmt="jsonl")
    with pytest.raises(TypeError, match="source must be a non-empty str"):
        grade_bytes(suite, RM_LINE, source=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_line_bytes must be a positive int"):
        grade_bytes(suite, RM_LINE, max_line_bytes=0)
    result = grade_bytes(suite, b'{"foo": 1}\n' + RM_LINE, max_line_bytes=64)
    assert [e.message.split("; ")[-1] for e in result.errors] == [
        "give grade_bytes its fmt= (the names: `trajgrade formats`)",
        "raise grade_bytes' max_line_bytes= if such records are expected",
    ]


@pytest.mark.parametrize("timeout", [None, 0, -1.0, float("nan"), float("inf"), "1"])
def test_a_regex_timeout_that_is_no_time_limit_is_refused(timeout: Any) -> None:
    """None or inf turned the regex time box (the ReDoS guard) off, so one
    hostile value could hang the grader; 0 or less timed out every match."""
    with pytest.raises(ValueError, match="regex_timeout must be a positive, finite"):
        StreamGrader.from_text(POLICY, regex_timeout=timeout)
    assert StreamGrader.from_text(POLICY, regex_timeout=1).suite


def test_feed_all_feeds_nothing_when_one_item_is_not_an_event() -> None:
    """A dict among the events raised TypeError after the events before it
    (up to the last badly typed one) had been graded and guarded."""
    engine = Engine(StreamGrader.from_text(POLICY).suite)
    rm = ToolCall(trace_id="t", name="bash", call_id="c", args={"command": "rm -rf /"})
    with pytest.raises(TypeError, match="is not an event"):
        engine.feed_all([rm, BAD[1][0], rm, {"type": "usage"}])  # type: ignore[list-item]
    assert engine.statistics().events == 0 and engine.decisions == []
    assert engine.anomalies == []
