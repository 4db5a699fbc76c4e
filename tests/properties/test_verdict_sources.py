"""A verdict's ``source`` names the line of the event that decided it, and
the input its trace was read from, however the input is chunked and
whatever blank lines it holds; a trace id read from a second input is
reported once (issue 36, item 2)."""

from __future__ import annotations

import itertools
import json

from hypothesis import given, settings
from hypothesis import strategies as st
from tests._support import suite

from trajgrade.engine.engine import Engine
from trajgrade.pipeline.decoder import SourceDecoder
from trajgrade.pipeline.grading import Grading
from trajgrade.pipeline.sources import InputSources

SUITE = suite(
    """
    graders:
      - type: tool-calls
        name: no-rm
        config:
          disallowed:
            - name: '^rm$'
    """
)
BLANKS = st.sampled_from(["", "   ", "\t"])


@st.composite
def logs(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A canonical log of a few traces' calls (some to ``rm``) with blank
    lines anywhere; the trace ids that call ``rm``."""
    traces = draw(st.lists(st.sampled_from("abcde"), min_size=1, max_size=30))
    lines: list[str] = []
    for n, trace in enumerate(traces):
        lines += draw(st.lists(BLANKS, max_size=2))
        name = draw(st.sampled_from(["ls", "cat", "rm"]))
        call = {
            "type": "tool_call",
            "trace_id": trace,
            "name": name,
            "call_id": f"c{n}",
        }
        lines.append(json.dumps(call))
    text = "\n".join(lines) + draw(st.sampled_from(["", "\n", "\n\n"]))
    return text, lines


def _graded(data: bytes, cuts: list[int], sources: InputSources, name: str) -> list:
    engine = Engine(SUITE, deciders=sources.deciders)
    grading = Grading(engine, sources=sources)
    decoder = SourceDecoder(name, fmt="trajgrade")
    out = []
    bounds = [0, *sorted({c % (len(data) + 1) for c in cuts}), len(data)]
    for a, b in itertools.pairwise(bounds):
        out += grading.feed(decoder, decoder.feed(data[a:b]))
    out += grading.feed(decoder, decoder.close())
    out += sources.sourced(engine.finish())
    return out


@settings(max_examples=150, deadline=None)
@given(logs(), st.lists(st.integers(min_value=0), max_size=6))
def test_the_line_named_is_the_deciding_call(
    log: tuple[str, list[str]], cuts: list[int]
) -> None:
    text, _ = log
    verdicts = _graded(text.encode(), cuts, InputSources(several=False), "run.jsonl")
    file_lines = text.split("\n")
    for v in verdicts:
        assert v.source is not None and v.source.file == "run.jsonl"
        if v.outcome == "fail":  # decided on the first rm call of its trace
            line = json.loads(file_lines[v.source.line - 1])
            assert (line["trace_id"], line["name"]) == (v.trace_id, "rm")
            assert line["call_id"] == v.matched.call_id
        else:  # passed at the end: no event decided it
            assert v.source.line is None


@settings(max_examples=50, deadline=None)
@given(logs(), logs())
def test_a_trace_in_two_inputs_is_reported_once(
    first: tuple[str, list[str]], second: tuple[str, list[str]]
) -> None:
    sources = InputSources(several=True)
    engine = Engine(SUITE, deciders=sources.deciders)
    grading = Grading(engine, sources=sources)
    for name, (text, _) in (
        ("a.jsonl", first),
        ("b.jsonl", second),
        ("a.jsonl", first),
    ):
        decoder = SourceDecoder(name, fmt="trajgrade")
        grading.feed(decoder, decoder.feed(text.encode()))
        grading.feed(decoder, decoder.close())

    def ids(text: str) -> set[str]:
        return {json.loads(x)["trace_id"] for x in text.split("\n") if x.strip()}

    both = ids(first[0]) & ids(second[0])
    assert sorted(d.trace_id for d in sources.duplicates) == sorted(both)
    assert all((d.first, d.again) == ("a.jsonl", "b.jsonl") for d in sources.duplicates)
    for v in sources.sourced(engine.finish()):
        expected = "a.jsonl" if v.trace_id in ids(first[0]) else "b.jsonl"
        assert v.source is not None and v.source.file == expected


def test_an_otlp_receivers_requests_name_no_source() -> None:
    """Verdicts of a run that receives OTLP have no ``source``: a request is
    no file, and its lines are no lines of one."""
    sources = InputSources(several=False, named=False)
    engine = Engine(SUITE, deciders=sources.deciders)
    grading = Grading(engine, sources=sources)
    decoder = SourceDecoder("otlp", fmt="trajgrade")
    line = b'{"type":"tool_call","trace_id":"t","name":"rm","call_id":"c1"}\n'
    (fail,) = grading.feed(decoder, decoder.feed(line))
    assert fail.outcome == "fail" and fail.source is None
    assert not sources.deciders  # drained all the same
