"""Decoding only what the suite reads does not show in results.

When no grader of a suite reads ``ToolResult.result`` the canonical reader
skips it, and when none routes ``usage`` it decodes usage without
``Usage``'s fold (trajgrade/events.py, ``Suite.projection``). On random suites of every streaming
grader type over random interleaved canonical streams, cut into random
chunks, sprinkled with broken lines (bad JSON, a wrong field type, invalid
UTF-8 inside a result) and non-ASCII results, the projected decode gives
the same verdicts, guard decisions, input errors and anomalies as the full
decode (an anomaly's ``event``, kept for its line, lacks the skipped payload).
"""

from __future__ import annotations

import functools
import gzip
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import chunked, sprinkled, streams, suites
from test_routing import mixed_suites

import trajgrade
from trajgrade.config.compile import compile_suite
from trajgrade.config.decode import decode_config
from trajgrade.engine.engine import Anomaly, Engine
from trajgrade.events import (
    LeanResult,
    LeanUsage,
    Projection,
    ToolResult,
    Usage,
    checked,
)
from trajgrade.formats.native import NativeReader
from trajgrade.graders.capabilities import Capabilities, reads_tool_results
from trajgrade.pipeline.decoder import SourceDecoder
from trajgrade.pipeline.grading import Grading
from trajgrade.pipeline.options import BATCH_FIXES
from trajgrade.pipeline.whole import GradeResult, grade_bytes

if TYPE_CHECKING:
    from strategies import Stream

    from trajgrade.config.model import Suite

#: Lines the full decode rejects or decodes differently from ASCII ones.
_ODD_LINES = (
    b'{"type":"tool_result","trace_id":"t0","call_id":"c1","result":"\xff\xfe"}',
    b'{"type":"tool_result","trace_id":"t1","result":"caf\xc3\xa9 \xe2\x9c\x93"}',
    b'{"type":"tool_result","trace_id":"t0","result":{"a":[1,"\\u00e9"]},"is_error":true}',
    b'{"type":"tool_result","trace_id":"t0","result":"x","is_error":"yes"}',
    b'{"type":"tool_result","trace_id":"t1","result":"unterminated}',
    b'{"type":"tool_result","trace_id":"t1","result":"\\q"}',
    b"not json at all",
)


def _full(suite: Suite, chunks: list[bytes]) -> GradeResult:
    """grade_bytes with every field decoded, whatever the suite reads."""
    engine = Engine(suite)
    grading = Grading(engine)
    decoder = SourceDecoder("<input>", fixes=BATCH_FIXES)
    verdicts = []
    for chunk in chunks:
        verdicts += grading.feed(decoder, decoder.feed(chunk))
    verdicts += grading.feed(decoder, decoder.close())
    verdicts += engine.finish()
    return GradeResult(
        verdicts=verdicts,
        errors=grading.errors,
        anomalies=grading.anomalies,
        decisions=engine.decisions,
    )


#: Mixed suites often hold a grader that reads results (no projection);
#: tool-calls-only suites are projected unless a ``result:`` filter reads.
_SUITES = st.one_of(mixed_suites(), suites(metrics=False).map(lambda c: c.suite))


@settings(max_examples=300, deadline=None)
@given(suite=_SUITES, stream=streams(max_traces=3), data=st.data())
def test_projected_decode_equals_full_decode(
    suite: Suite, stream: Stream, data: st.DataObject
) -> None:
    body = sprinkled(data, stream.events, _ODD_LINES)
    chunks = data.draw(chunked(body), label="chunks")
    got = grade_bytes(suite, chunks)
    want = _full(suite, chunks)
    assert got.verdicts == want.verdicts
    assert got.decisions == want.decisions
    assert [(str(e), e.location) for e in got.errors] == [
        (str(e), e.location) for e in want.errors
    ]
    # What is reported of an anomaly is the same; the event it carries (for
    # its line) has no result payload when the suite skips it.
    assert [(_no_payload(a), loc) for a, loc in got.anomalies] == [
        (_no_payload(a), loc) for a, loc in want.anomalies
    ]


def _no_payload(a: Anomaly) -> Anomaly:
    ev = a.event
    if isinstance(ev, ToolResult):  # a LeanResult is a ToolResult without payload
        ev = ToolResult(**{f: getattr(ev, f) for f in ev.__struct_fields__})
        ev = msgspec.structs.replace(ev, result=None)
    return msgspec.structs.replace(a, event=ev)


def _suite(text: str) -> Suite:
    return compile_suite(decode_config(text))


def test_the_projection_is_taken_only_when_nothing_reads_results() -> None:
    """The property is not vacuous: these suites do skip results, and a
    ``result:`` filter, a result extractor or an undeclared grader keeps them."""
    names_only = _suite(
        "graders:\n  - {type: tool-calls, name: a, config: {required: [bash]}}\n"
        "  - {type: letta-tool, name: b, config: {extractor: tool_arguments,"
        " extractor_config: {tool_name: bash}, function: contains}}\n"
    )
    assert not reads_tool_results(names_only.capabilities)
    filtered = _suite(
        "graders:\n  - {type: tool-calls, name: a, config: "
        "{required: [{name: bash, result: ok}]}}\n"
    )
    assert reads_tool_results(filtered.capabilities)
    # A projected decode would fail this trace (no result to match "ok").
    stream = (
        b'{"type":"tool_call","trace_id":"t","name":"bash","call_id":"c"}\n'
        b'{"type":"tool_result","trace_id":"t","call_id":"c","result":"ok"}\n'
    )
    (verdict,) = grade_bytes(filtered, stream).verdicts
    assert verdict.outcome == "pass"
    output = _suite(
        "graders:\n  - {type: letta-tool, name: b, config: {extractor: tool_output,"
        " extractor_config: {tool_name: bash}, function: contains}}\n"
    )
    assert reads_tool_results(output.capabilities)

    class Plugin:  # a third-party grader that declares nothing
        event_types = frozenset({ToolResult})

    assert reads_tool_results([Capabilities.of(Plugin())])


def test_a_projected_reader_hands_out_tool_results_without_payload() -> None:
    line = b'{"type":"tool_result","trace_id":"t","call_id":"c","result":"big","is_error":false,"step":2,"ts":1.5}\n'
    reader = NativeReader(source="s", default_trace="s")
    (full,), _, _ = reader.feed(line, 1)
    reader.skip_tool_results()
    (lean,), _, _ = reader.feed(line, 1)
    assert type(lean) is LeanResult and isinstance(lean, ToolResult)
    assert lean.result is None
    fields = ("trace_id", "call_id", "is_error", "step", "ts", "name", "duration_ms")
    want = ToolResult(trace_id="t", call_id="c", is_error=False, step=2, ts=1.5)
    assert [getattr(lean, f) for f in fields] == [getattr(want, f) for f in fields]
    # Encoded again, it is the canonical result without its payload.
    assert msgspec.json.encode(lean) == msgspec.json.encode(want)
    assert full.result == "big"
    # A non-ASCII chunk is decoded fully (msgspec does not check skipped UTF-8).
    (utf8,), _, _ = reader.feed(line.replace(b"big", "b\u00efg".encode()), 1)
    assert utf8.result == "b\u00efg"


_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
#: Real logs: the benchmark corpus (canonical, its usage in the ``tokens``
#: spelling), a shipped example session, a Claude Code and a Codex session.
_REAL_LOGS = (
    _FIXTURES / "bench" / "small_events.jsonl.gz",
    Path(trajgrade.__file__).parent / "examples" / "session.jsonl",
    _FIXTURES / "claude-code" / "codemie_v2.0.64_small.jsonl",
    _FIXTURES / "codex" / "localpush_v0.104_redacted_118_calls.jsonl",
)


@functools.cache
def _real_log(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if path.suffix == ".gz" else data


#: Suites that route usage (token budgets) and suites that do not.
_USAGE_SUITES = st.one_of(mixed_suites(), suites().map(lambda c: c.suite), _SUITES)


@settings(max_examples=60, deadline=None)
@given(suite=_USAGE_SUITES, path=st.sampled_from(_REAL_LOGS), data=st.data())
def test_projected_decode_equals_full_decode_on_real_logs(
    suite: Suite, path: Path, data: st.DataObject
) -> None:
    """The suite's projection (results, usage) shows in nothing it returns,
    on real logs: a window of the benchmark corpus's lines, or a whole
    recorded session, cut into random chunks."""
    body = _real_log(path)
    if path.suffix == ".gz":  # a window of lines, so examples stay quick
        lines = body.splitlines(keepends=True)
        start = data.draw(st.integers(0, len(lines) - 1), label="start")
        size = data.draw(st.integers(1, 400), label="lines")
        body = b"".join(lines[start : start + size])
    chunks = data.draw(chunked(body), label="chunks")
    got = grade_bytes(suite, chunks)
    want = _full(suite, chunks)
    assert got.verdicts == want.verdicts
    assert got.decisions == want.decisions
    assert [(str(e), e.location) for e in got.errors] == [
        (str(e), e.location) for e in want.errors
    ]
    assert [(_no_payload(a), loc) for a, loc in got.anomalies] == [
        (_no_payload(a), loc) for a, loc in want.anomalies
    ]


def test_usage_is_decoded_without_its_fold_only_when_no_grader_routes_it() -> None:
    """The usage projection is taken (the property is not vacuous) and left
    when a grader routes usage: a token budget sees the folded counts."""
    line = b'{"type":"usage","trace_id":"t","tokens":{"input":30,"output":4},"cost_usd":0.5}\n'
    names_only = _suite(
        "graders:\n  - {type: tool-calls, name: a, config: {required: [bash]}}\n"
    )
    assert names_only.projection == Projection(tool_results=False, usage=False)
    budget = _suite("graders:\n  - {type: token-budget, name: b, config: {max: 33}}\n")
    assert budget.projection.usage

    def decoded(suite: Suite) -> object:
        decoder = SourceDecoder("s", projection=suite.projection)
        (event,) = decoder.feed(line).events
        return event

    lean = decoded(names_only)
    assert type(lean) is LeanUsage and not isinstance(lean, Usage)
    assert (lean.trace_id, lean.cost_usd, lean.tokens) == (
        "t",
        0.5,
        {"input": 30, "output": 4},
    )
    # Given back to the API (StreamGrader.feed checks events), it is a Usage.
    again = checked(lean)
    assert type(again) is Usage and (again.input_tokens, again.tokens) == (30, None)
    full = decoded(budget)
    assert type(full) is Usage
    assert (full.input_tokens, full.output_tokens, full.tokens) == (30, 4, None)
    # The budget counts the folded 34 tokens: over its 33.
    verdicts = grade_bytes(budget, line).verdicts
    assert [v.outcome for v in verdicts if v.final] == ["fail"]
    # A wrongly typed usage line is refused by both decoders alike.
    bad = b'{"type":"usage","trace_id":"t","tokens":{"input":"x"}}\n'
    assert [str(e) for e in grade_bytes(names_only, bad).errors] == [
        str(e) for e in grade_bytes(budget, bad).errors
    ]
    assert grade_bytes(names_only, bad).errors
