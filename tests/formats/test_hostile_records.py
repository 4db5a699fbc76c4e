"""Problems an adversarial review of the adapters found, one test each.

Each test fed the old code fails: a valid document lost at a large integer,
broken lines whose trace was not tainted (vally, agentv, openresponses,
OTLP), and unnamed traces renamed by a broken line before them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests._support import suite
from tests.formats._decode import DOCUMENTS, raw
from tests.formats.test_every_adapter import RECORDED

from trajgrade.pipeline.decoder import SourceDecoder
from trajgrade.pipeline.whole import grade_bytes

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
#: Graders whose verdicts depend on every event of a trace.
POLICY = suite(
    """
    graders:
      - type: tool-call-count
        config: {max: 10}
      - type: turn-count
        config: {max: 10}
    """
)


def _events(data: bytes, fmt: str) -> tuple[list[bytes], list[str]]:
    dec = SourceDecoder("doc.json", fmt=fmt)
    batch, end = dec.feed(data), dec.close()
    events = [
        json.dumps(e.__struct_fields__).encode() for e in batch.events + end.events
    ]
    return events, [e.message for e in batch.errors + end.errors]


@pytest.mark.parametrize("fmt", DOCUMENTS)
@pytest.mark.parametrize("given", [True, False], ids=["--format", "detected"])
def test_an_integer_over_64_bits_does_not_end_a_document(fmt: str, given: bool) -> None:
    # yajl parsed integers as 64-bit (ijson's use_float=True): a larger one,
    # valid JSON that every line format reads, failed the whole rest of the
    # document as "integer overflow".
    data = raw(FIXTURES / RECORDED[fmt])
    at = data.find(b"{", 1) + 1  # inside the first object after the start
    big = (
        data[:at]
        + b'"zz_big": 1180591620717411303424, "zz_neg": -99999999999999999999999, '
        + data[at:]
    )
    want, _ = _events(data, fmt)
    dec = SourceDecoder("doc.json", fmt=fmt if given else "auto")
    got = dec.feed(big)
    end = dec.close()
    assert dec.format == fmt
    assert got.errors + end.errors == []
    assert len(got.events + end.events) == len(want) > 0


def test_a_large_integer_inside_an_item_is_read_as_written() -> None:
    doc = {
        "steps": [
            {
                "step_id": 1,
                "source": "agent",
                "message": "x",
                "tool_calls": [
                    {
                        "tool_call_id": "c1",
                        "function_name": "calc",
                        "arguments": {"n": 2**70, "f": 1.5},
                    }
                ],
            }
        ],
        "session_id": "s",
        "schema_version": "ATIF-v1.6",
        "agent": {"name": "a", "version": "1"},
    }
    dec = SourceDecoder("t.json", fmt="atif")
    events = dec.feed(json.dumps(doc).encode()).events + dec.close().events
    call = next(e for e in events if getattr(e, "name", None) == "calc")
    assert call.args == {"n": 2**70, "f": 1.5}
    assert type(call.args["f"]) is float


def _grade(fmt: str, *lines: bytes) -> tuple[dict[str, set[str]], list[Any]]:
    result = grade_bytes(POLICY, b"\n".join(lines) + b"\n", source="f", fmt=fmt)
    outcomes: dict[str, set[str]] = {}
    for v in result.verdicts:
        if v.final:
            outcomes.setdefault(v.trace_id, set()).add(str(v.outcome))
    return outcomes, result.errors


def test_a_broken_vally_event_line_taints_the_sources_trace() -> None:
    # vally event lines belong to the source's trace; a broken one named no
    # trace, so the trace lost its failed result and still passed.
    call = b'{"type":"tool_call","data":{"toolName":"bash","toolCallId":"c1"}}'
    result = b'{"type":"tool_result","data":{"toolCallId":"c1","success":false'
    outcomes, errors = _grade("vally", call, result)
    assert [(e.location.line, e.trace_id) for e in errors] == [(2, "f")]
    assert outcomes == {"f": {"error"}}
    outcomes, errors = _grade("vally", call, b"[1]")
    assert [(e.location.line, e.trace_id) for e in errors] == [(2, "f")]


@pytest.mark.parametrize(
    ("fmt", "whole"),
    [
        (
            "vally",
            b'{"events":[{"type":"tool_call","data":{"toolName":"bash","toolCallId":"c1"}}]}',
        ),
        ("agentv", b'{"output":[{"role":"assistant","content":"hi"}]}'),
        ("openresponses", b'[{"type":"message","role":"user","content":"hi"}]'),
        (
            "openresponses",
            b'{"items":[{"type":"message","role":"user","content":"hi"}]}',
        ),
    ],
)
def test_a_broken_whole_trace_line_keeps_the_names_after_it(
    fmt: str, whole: bytes
) -> None:
    # Unnamed whole traces are named by position (f, f#2, f#3); a broken
    # line was not counted, so the next trace took its name, and the lost
    # trace was tainted nowhere.
    clean, _ = _grade(fmt, whole, whole, whole)
    outcomes, errors = _grade(fmt, whole, whole[:-5], whole)
    assert [(e.location.line, e.trace_id) for e in errors] == [(2, "f#2")]
    assert outcomes == {"f": clean["f"], "f#2": {"error"}, "f#3": clean["f#3"]}


def test_a_non_object_agentv_line_is_a_lost_record() -> None:
    whole = b'{"output":[{"role":"assistant","content":"hi"}]}'
    clean, _ = _grade("agentv", whole, whole, whole)
    outcomes, errors = _grade("agentv", whole, b"42", whole)
    assert [(e.location.line, e.trace_id) for e in errors] == [(2, "f#2")]
    assert outcomes["f#3"] == clean["f#3"]


def test_a_broken_agentv_transcript_line_taints_its_test() -> None:
    line = b'{"test_id":"t1","message_index":%d,"role":"assistant","content":"x"}'
    outcomes, errors = _grade("agentv", line % 0, (line % 1)[:-3], line % 2)
    assert [(e.location.line, e.trace_id) for e in errors] == [(2, "t1")]
    assert outcomes == {"t1": {"error"}}


def test_a_broken_otlp_line_taints_every_trace_it_names() -> None:
    # A collector export line holds spans of many traces; a broken one
    # named no trace, so each of them lost spans and still passed.
    first, second = (FIXTURES / "otel" / "agent_run.jsonl").read_bytes().splitlines()
    record = json.loads(second)
    spans = record["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[-1]["traceId"] = "0af7651916cd43dd8448eb211c80319c"
    line = json.dumps(record).encode()
    clean, _ = _grade("otel", first)
    outcomes, errors = _grade("otel", first, line[:-10])
    traces = {span["traceId"] for span in spans}
    assert len(traces) == 2
    assert {(e.location.line, e.trace_id) for e in errors} == {(2, t) for t in traces}
    assert set(outcomes) == traces
    assert all(outcomes[t] == {"error"} for t in traces)
    assert set(clean) == {spans[0]["traceId"]}  # (the first line alone)


def test_a_vally_event_whose_type_is_not_text_is_rejected_in_plain_words() -> None:
    # With `data`, such an event was skipped silently as an unknown type.
    _, errors = _grade("vally", b'{"type":[1],"data":{"toolName":"x"}}')
    assert [(e.location.field, e.trace_id) for e in errors] == [("type", "f")]
    assert errors[0].message.startswith("cannot read a vally event: type must be")
    _, errors = _grade("vally", b'{"type":[1]}')
    assert errors[0].message.startswith("cannot read a vally event: unknown event")


def _fed(data: bytes, size: int, fmt: str) -> tuple[dict[str, set[str]], list[Any]]:
    chunks = [data[i : i + size] for i in range(0, len(data), size)]
    result = grade_bytes(POLICY, chunks, source="f", fmt=fmt)
    outcomes: dict[str, set[str]] = {}
    for v in result.verdicts:
        if v.final:
            outcomes.setdefault(v.trace_id, set()).add(str(v.outcome))
    return outcomes, result.errors


@pytest.mark.parametrize("fmt", DOCUMENTS)
def test_a_nul_byte_in_a_document_is_reported_at_its_line_however_it_is_cut(
    fmt: str,
) -> None:
    # yajl's excerpt of the fault is a C string: a NUL byte ended it, so the
    # fault was not found in the bytes and the error named the chunk's last
    # line instead (the document's last line when read whole).
    data = raw(FIXTURES / RECORDED[fmt])
    at = len(data) // 2
    data = data[:at] + b"\x00" + data[at:]
    line = data[:at].count(b"\n") + 1
    for size in (len(data), 4096, 7):
        _, errors = _fed(data, size, fmt)
        assert [e.location.line for e in errors] == [line], size


def test_a_run_broken_in_an_openai_chat_document_does_not_taint_the_run_before() -> (
    None
):
    # The error was charged to the last whole run (its trace ended in
    # `error` when read whole, not when read in pieces); the broken run's
    # trace cannot be named for sure (its `trial` comes last).
    data = raw(FIXTURES / RECORDED["openai-chat-json"])
    clean, _ = _fed(data, len(data), "openai-chat-json")
    at = len(data) // 2  # inside the third run (26/1)
    broken = data[:at] + b"\x00" + data[at:]
    for size in (len(broken), 7):
        outcomes, errors = _fed(broken, size, "openai-chat-json")
        assert [e.trace_id for e in errors] == [None]
        assert outcomes == {t: clean[t] for t in ("13/0", "13/1")}
    named = broken.replace(b'"task_id": 26,', b'"id": "run-26", "task_id": 26,')
    _, errors = _fed(named, len(named), "openai-chat-json")
    assert [e.trace_id for e in errors] == ["run-26"]


def test_an_unknown_first_line_is_charged_alike_however_it_arrives() -> None:
    # The document-prefix path sniffed its trace from as many bytes as had
    # arrived: line 2's trace when read whole, none in small pieces.
    data = b'{"\\ud800x": 1, "y"\\ud800: 2}\n{"trace_id":"a","type":"turn_start"}\n'
    for size in (len(data), 7, 1):
        _, errors = _fed(data, size, "auto")
        assert [(e.location.line, e.trace_id) for e in errors] == [(1, None)], size


@pytest.mark.parametrize("fmt", DOCUMENTS)
def test_a_deep_line_early_in_a_named_document_is_part_of_it(fmt: str) -> None:
    # With --format, the first chunk was framed as lines before the reader
    # opened: a line nested past the bound was blanked out of the document
    # (read whole: a different document), not refused as the item it is in.
    data = raw(FIXTURES / RECORDED[fmt])
    at = data.find(b"{", 1) + 1
    deep = data[:at] + b'"zz": ' + b"[" * 200 + b"]" * 200 + b", " + data[at:]
    whole = _fed(deep, len(deep), fmt)
    for size in (4096, 97):
        pieces = _fed(deep, size, fmt)
        assert pieces[0] == whole[0], size
        assert [(e.location.field, e.trace_id) for e in pieces[1]] == [
            (e.location.field, e.trace_id) for e in whole[1]
        ]
    assert all("nested deeper" in e.message for e in whole[1])


@pytest.mark.parametrize("fmt", DOCUMENTS)
def test_a_minified_document_streams_past_the_line_limit(fmt: str) -> None:
    # A document on one line was held whole until its end (no newline) and
    # dropped as one line over --max-line-bytes.
    data = json.dumps(json.loads(raw(FIXTURES / RECORDED[fmt]))).encode()
    want, _ = _events(data, fmt)
    dec = SourceDecoder("min.json", fmt=fmt, max_line_bytes=1024)
    events, errors = [], []
    for i in range(0, len(data), 512):
        batch = dec.feed(data[i : i + 512])
        events += batch.events
        errors += batch.errors
        if i + 512 < len(data) // 2:
            early = len(events)
    end = dec.close()
    assert errors + end.errors == []
    assert len(events + end.events) == len(want)
    assert dec.offset == len(data)
    assert early > 0 or fmt == "openai-chat-json"  # (its first run is long)


@pytest.mark.parametrize("fmt", ["claude-code", "trajgrade"])
def test_a_duplicate_key_reads_alike_on_a_line_with_many_brackets(fmt: str) -> None:
    # A line with over 128 opening brackets is decoded once by the depth
    # bound and its value converted: a duplicate key then read as its last
    # value, while the typed decoder (any other line, or the same line when
    # the buffer falls back to reading line by line) rejects the first.
    lines = [ln for ln in raw(FIXTURES / _ANY_FILE[fmt]).split(b"\n") if ln.strip()]
    brackets = b"[" + b"[]," * 130 + b"[]]"  # (many brackets, 2 levels deep)
    key = b'"timestamp"' if fmt == "claude-code" else b'"name"'
    i = next(i for i, ln in enumerate(lines) if i and key in ln)
    lines[i] = lines[i].replace(b"{", b"{" + key + b": " + brackets + b", ", 1)
    alone = b"\n".join(lines) + b"\n"
    broken = alone + b'{"type": 1e400}\n'  # (its buffer is read line by line)
    for data in (alone, broken):
        # (Line 1 alone first: the reader opens on it, and the next chunk's
        # lines go through the depth bound's measured path.)
        first = data.index(b"\n") + 1
        chunks = [data[:first], data[first:]]
        errors = grade_bytes(POLICY, chunks, source="f", fmt=fmt).errors
        where = (errors[0].location.line, errors[0].location.field)
        assert where == (i + 1, key.strip(b'"').decode())


_ANY_FILE = {
    "claude-code": RECORDED["claude-code"],
    "trajgrade": "../../src/trajgrade/examples/session.jsonl",
}


def test_an_openai_chat_document_broken_between_runs_taints_none_of_them() -> None:
    data = raw(FIXTURES / RECORDED["openai-chat-json"])
    clean, _ = _fed(data, len(data), "openai-chat-json")
    # Before the third run's opening brace: after the second run and its comma.
    at = data.rindex(b"\n  {", 0, data.index(b'"task_id": 26')) + 1
    broken = data[:at] + b" garbage " + data[at:]
    for size in (len(broken), 7):
        outcomes, errors = _fed(broken, size, "openai-chat-json")
        assert [e.trace_id for e in errors] == [None]
        assert outcomes == {t: clean[t] for t in ("13/0", "13/1")}


@pytest.mark.parametrize("fmt", DOCUMENTS)
def test_a_document_cut_mid_line_is_reported_alike_however_it_is_cut(fmt: str) -> None:
    # A document is fed as its bytes come (no line framing): its last line
    # without a newline must count as a line of those bytes, or the error
    # names the line before when read whole, where the trace's end is placed
    # too, and in pieces the taint comes after the end and the trace passes.
    data = raw(FIXTURES / RECORDED[fmt])
    cut = data[: data.index(b"\n", len(data) // 3) + 5]
    whole = _fed(cut, len(cut), fmt)
    for size in (7, 4096):
        pieces = _fed(cut, size, fmt)
        assert pieces[0] == whole[0], size
        assert [e.location.line for e in pieces[1]] == [
            e.location.line for e in whole[1]
        ]
    assert [e.location.line for e in whole[1]] == [cut.count(b"\n") + 1]


@pytest.mark.parametrize("fmt", DOCUMENTS)
def test_a_blank_file_named_as_a_document_is_an_empty_input(fmt: str) -> None:
    # An empty file gave nothing; one of blank lines an error ("not valid
    # JSON: premature EOF") and, for most formats, a trace of nothing.
    for data in (b"", b"\n\r\n  \n", b"\xef\xbb\xbf\n"):
        result = grade_bytes(POLICY, data, source="f", fmt=fmt)
        assert (result.verdicts, result.errors) == ([], []), data
