"""Hostile input never crashes a run, and the exit status never lies.

Deep nesting: every path where untrusted JSON becomes values (line readers,
embedded JSON strings, documents, the API's mappings) refuses a value nested
deeper than ``MAX_DEPTH`` as a located error for that record only; the other
traces' verdicts are exactly those of the run without it. Exit statuses are
checked per case with real subprocesses.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests._support import suite

from trajgrade import StreamGrader
from trajgrade._util.depth import (
    MAX_DEPTH,
    scan,
    too_deep,
    value_too_deep,
)
from trajgrade.pipeline.whole import grade_bytes

FIXTURES = Path(__file__).parents[1] / "fixtures"

POLICY = """\
graders:
  - type: tool-calls
    name: rx
    config:
      required:
        - name: bash
          result: "ok"
  - type: turn-count
    config: {max: 5}
"""


def _line(**ev: Any) -> bytes:
    return json.dumps(ev).encode() + b"\n"


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _clean(trace: str) -> bytes:
    return (
        _line(type="tool_call", trace_id=trace, name="bash", call_id="1", args={})
        + _line(type="tool_result", trace_id=trace, call_id="1", result="ok")
        + _line(type="trace_end", trace_id=trace)
    )


def _finals(verdicts: list[Any]) -> dict[tuple[str, str], str]:
    return {(v.trace_id, v.grader): str(v.outcome) for v in verdicts if v.final}


# ---------------------------------------------------------------- the bound
@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 600, 5000, 200_000])
def test_deep_values_are_found(depth: int) -> None:
    assert too_deep(_nested(depth))
    assert too_deep('{"a":' + "[" * depth)  # cut short: still too deep
    assert scan(b'{"x":1}\n' + _nested(depth).encode() + b"\n").deep == [1]


def test_shallow_values_and_brackets_in_strings_pass() -> None:
    assert not too_deep(_nested(MAX_DEPTH))
    assert not too_deep(json.dumps({"s": "[" * 10_000, "t": '\\"{' * 500}))
    wide = json.dumps([[[1]] * 5000])
    assert not too_deep(wide)
    assert scan(wide.encode() + b"\n" + wide.encode()).deep == []
    assert not value_too_deep(json.loads(_nested(MAX_DEPTH)))
    assert value_too_deep(json.loads(_nested(MAX_DEPTH + 1)))


# ---------------------------------------------------------------- per format
_TEXT = st.text(alphabet='[]{}"\\ab\n', max_size=12)
_JSON = st.recursive(
    st.none() | st.integers() | _TEXT,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(
        st.tuples(_JSON, st.integers(0, 2 * MAX_DEPTH), st.booleans()), max_size=6
    )
)
def test_a_chunk_is_measured_as_its_lines_are(
    values: list[tuple[Any, int, bool]],
) -> None:
    """``scan`` measures a chunk whose lines have many brackets in one
    go; it finds exactly the lines ``too_deep`` finds one by one, whatever
    brackets, quotes and backslashes the strings hold."""
    lines = []
    for value, depth, as_string in values:
        nested: Any = value
        for _ in range(depth):
            nested = [nested]
        # As a string, the brackets are text: never deep, but counted.
        lines.append(json.dumps(json.dumps(nested) if as_string else nested).encode())
    # Escaped quotes and backslashes before brackets in strings: not deep.
    lines.append(json.dumps({"s": 'a"' + "[" * 300, "t": "\\" + "{" * 200}).encode())
    body = b"".join(line + b"\n" for line in lines)
    want = [i for i, line in enumerate(lines) if too_deep(line)]
    found = scan(body)
    assert (found.newlines, found.deep) == (len(lines), want)
    # The lines with many brackets within the bound come with their values,
    # which readers take instead of decoding those bytes again.
    heavy = [
        i
        for i, line in enumerate(lines)
        if line.count(b"[") + line.count(b"{") > MAX_DEPTH and i not in want
    ]
    assert [i for i, *_ in found.measured] == heavy
    for i, start, end, value in found.measured:
        assert body[start:end] == lines[i] and value == json.loads(lines[i])


@settings(max_examples=150, deadline=None)
@given(
    # (the event object and its args add two levels)
    depths=st.lists(st.sampled_from([MAX_DEPTH - 2, MAX_DEPTH - 1, 400]), max_size=4),
    data=st.data(),
)
def test_deep_lines_are_found_wherever_chunks_end(
    depths: list[int], data: st.DataObject
) -> None:
    """A chunk's lines are counted and measured in one pass over the whole
    chunk (pipeline ``_decode``); lines cut by a chunk boundary belong to the
    next call. Wherever the chunks end, the same lines are refused, at the
    same line numbers, and the other traces are graded the same."""
    s = suite(POLICY)
    lines = [_clean(t) for t in ("a", "b", "c")]
    for k, depth in enumerate(depths):
        deep = f'{{"type":"tool_call","trace_id":"d{k}","name":"bash","call_id":"1","args":{{"a":{_nested(depth)}}}}}\n'
        lines.insert(data.draw(st.integers(0, len(lines))), deep.encode())
    body = b"".join(lines)
    want = grade_bytes(s, body, source="log.jsonl")
    cuts = sorted(data.draw(st.sets(st.integers(0, len(body)), max_size=12)))
    chunks = [body[a:b] for a, b in itertools.pairwise([0, *cuts, len(body)])]
    got = grade_bytes(s, chunks, source="log.jsonl")
    assert [(e.location, e.trace_id) for e in got.errors] == [
        (e.location, e.trace_id) for e in want.errors
    ]
    assert len(want.errors) == sum(d + 2 > MAX_DEPTH for d in depths)
    assert got.verdicts == want.verdicts


@pytest.mark.parametrize(
    ("where", "depth"),
    [
        ("args", 1000),  # msgspec's own recursion limit
        ("args", 300),
        ("result", 500),  # JSON stringification for the result: filter
    ],
)
def test_a_deep_line_is_an_error_for_its_trace_only(where: str, depth: int) -> None:
    s = suite(POLICY)
    bad = (
        _line(type="tool_call", trace_id="deep", name="bash", call_id="1", args={})
        + f'{{"type":"tool_result","trace_id":"deep","call_id":"1","{where}":{_nested(depth)}}}\n'.encode()
    )
    if where == "args":
        bad = (
            f'{{"type":"tool_call","trace_id":"deep","name":"bash","call_id":"1","args":{{"a":{_nested(depth)}}}}}\n'
        ).encode()
    clean = _clean("a") + _clean("b")
    want = _finals(grade_bytes(s, clean).verdicts)
    got = grade_bytes(s, _clean("a") + bad + _clean("b"), source="log.jsonl")
    finals = _finals(got.verdicts)
    assert {k: v for k, v in finals.items() if k[0] != "deep"} == want
    assert finals[("deep", "rx")] == "error"
    [err] = got.errors
    assert err.location.file == "log.jsonl"
    assert err.location.line in (4, 5)
    assert err.trace_id == "deep"
    assert "nested deeper than" in err.message


def test_deep_json_inside_a_claude_code_record_is_located() -> None:
    """A real Claude Code transcript with one tool input nested too deep."""
    src = FIXTURES / "claude-code" / "live_v2.1.197_transcript.jsonl"
    lines = src.read_bytes().splitlines(keepends=True)
    target, rec = next(
        (i, r)
        for i, r in enumerate(map(msgspec.json.decode, lines))
        if any(
            isinstance(b, dict) and b.get("type") == "tool_use"
            for b in (r.get("message") or {}).get("content") or []
        )
    )
    for block in rec["message"]["content"]:
        if block.get("type") == "tool_use":
            block["input"] = {"deep": json.loads(_nested(MAX_DEPTH + 10))}
    bad = [*lines]
    bad[target] = msgspec.json.encode(rec) + b"\n"
    s = suite(POLICY)
    got = grade_bytes(s, b"".join(bad), source="t.jsonl")
    assert [e.location.line for e in got.errors] == [target + 1]
    assert got.verdicts  # the rest of the run was graded


def test_deep_item_of_a_json_document_is_an_error() -> None:
    src = FIXTURES / "atif" / "atif2otel_claude-code_v1.7_pass.json"
    doc = json.loads(src.read_text())
    doc["steps"][1]["extra"] = json.loads(_nested(MAX_DEPTH + 50))
    s = suite(POLICY)
    got = grade_bytes(s, json.dumps(doc, indent=2).encode(), source="d.json")
    assert any("nested deeper than" in e.message for e in got.errors)
    # (A fail sealed before the loss stands; what was still open is error.)
    assert {str(v.outcome) for v in got.verdicts if v.grader == "rx"} == {"error"}


def test_stream_grader_feed_never_raises_on_deep_data() -> None:
    g = StreamGrader(suite(POLICY))
    deep: Any = []
    for _ in range(5000):
        deep = [deep]
    assert g.feed({"type": "tool_call", "trace_id": "m", "name": "x", "a": deep}) == []
    assert (
        g.feed('{"type":"tool_call","trace_id":"s","args":' + _nested(3000) + "}") == []
    )
    assert g.feed({"type": "tool_call", "trace_id": "o", "name": object()}) == []
    assert len(g.errors) == 3
    finals = _finals(g.finish())
    assert {finals[(t, "rx")] for t in ("m", "s", "o")} == {"error"}


# ---------------------------------------------------------------- exit status
def _trajgrade(*args: str | Path, cwd: Path, stdin: bytes = b"") -> tuple[int, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "trajgrade", *map(str, args)],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        timeout=60,
        check=False,
    )
    return proc.returncode, proc.stderr.decode()


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "p.yaml").write_text(POLICY)
    (tmp_path / "pass.jsonl").write_bytes(_clean("a"))
    (tmp_path / "fail.jsonl").write_bytes(
        _line(type="tool_call", trace_id="f", name="bash", call_id="1")
        + _line(type="trace_end", trace_id="f")
    )
    (tmp_path / "binary.dat").write_bytes(Path(sys.executable).read_bytes()[:65536])
    return tmp_path


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "status"),
    [
        (("grade", "-c", "p.yaml", "pass.jsonl"), 0),
        (("grade", "-c", "p.yaml", "fail.jsonl"), 1),
        (("grade", "-c", "p.yaml", "pass.jsonl", "fail.jsonl"), 1),
        (("grade", "-c", "missing.yaml", "pass.jsonl"), 2),
        (("grade", "-c", "p.yaml", "no-such-file.jsonl"), 2),
        (("grade", "-c", "p.yaml", "--bogus-option"), 2),
        # Read input, graded nothing: never 0.
        (("grade", "-c", "p.yaml", "binary.dat"), 5),
        (("grade", "-c", "p.yaml", "--format", "codex", "pass.jsonl"), 5),
        (("run", "-c", "p.yaml", "--", sys.executable, "-c", "print('hello')"), 5),
        (("run", "-c", "p.yaml", "--", "cat", "pass.jsonl"), 0),
        (("run", "-c", "p.yaml", "--stop-on", "never", "--", "cat", "fail.jsonl"), 1),
    ],
)
def test_exit_status(work: Path, args: tuple[str, ...], status: int) -> None:
    rc, err = _trajgrade(*args, cwd=work)
    assert rc == status, err
    assert "Traceback" not in err


@pytest.mark.slow
def test_run_finished_counts_dropped_events(work: Path) -> None:
    log = work / "late.jsonl"
    log.write_bytes(
        _clean("a")
        + _line(type="turn_start", trace_id="a") * 3  # after trace_end
        + b"\x00\xff not json\n"
    )
    rc, err = _trajgrade("grade", "-c", "p.yaml", "--log-level", "info", log, cwd=work)
    finished = json.loads(err.strip().splitlines()[-1])
    assert finished["event"] == "run_finished"
    assert finished["dropped_events"] == {
        "after_trace_end": 3,
        "after_final_verdicts": 0,
        "rejected_record": 1,
    }
    assert rc == finished["exit_code"] == 0


@pytest.mark.slow
def test_fail_fast_reports_no_unread_line_as_broken(work: Path) -> None:
    """--fail-fast stops mid-file: the line cut by the last read is unread,
    not truncated JSON, and no trace gets an error verdict for it."""
    big = work / "big.jsonl"
    with big.open("wb") as f:
        f.write(_line(type="tool_call", trace_id="bad", name="web_fetch"))
        for i in range(100_000):
            f.write(
                _line(
                    type="tool_call",
                    trace_id=f"t{i % 50}",
                    name="bash",
                    call_id=f"c{i}",
                    args={"command": "ls -la"},
                )
            )
    (work / "ff.yaml").write_text(
        'graders:\n  - type: tool-calls\n    name: nofetch\n    config:\n      disallowed: ["^web_fetch$"]\n'
    )
    argv = ["grade", "-c", "ff.yaml", "--fail-fast", "--output", "jsonl", str(big)]
    proc = subprocess.run(
        [sys.executable, "-m", "trajgrade", *argv],
        cwd=work,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    assert b"input_rejected" not in proc.stderr
    verdicts = [json.loads(x) for x in proc.stdout.splitlines()]
    finals = [(v["trace_id"], v["grader"]) for v in verdicts if v["final"]]
    assert len(finals) == len(set(finals))
    assert {v["outcome"] for v in verdicts if v["trace_id"] != "bad"} == {"pass"}


@pytest.mark.slow
def test_on_fail_gets_a_huge_trace_id_through_stdin(work: Path) -> None:
    """A 200 KiB trace id cannot be an environment string (E2BIG): the
    command still runs, with the id cut in the environment and whole on stdin."""
    tid = "t" * 200_000
    log = work / "huge.jsonl"
    log.write_bytes(
        _line(type="tool_call", trace_id=tid, name="bash", call_id="1")
        + _line(type="trace_end", trace_id=tid)
    )
    cmd = 'cat > got.json; printf %s "$TRAJGRADE_TRACE_ID" > env_id; printf %s "$TRAJGRADE_TRUNCATED" > cut'
    rc, err = _trajgrade("grade", "-c", "p.yaml", "--on-fail", cmd, log, cwd=work)
    assert rc == 1, err
    assert "on_fail_failed" not in err
    assert json.loads((work / "got.json").read_text())["trace_id"] == tid
    env_id = (work / "env_id").read_text()
    assert tid.startswith(env_id[:-1])
    assert len(env_id) < 5000
    assert (work / "cut").read_text() == "TRAJGRADE_TRACE_ID"


def test_a_reader_failure_costs_only_its_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader that raises (a bug hostile input found) loses the lines it
    fails on, located; the batch's other lines are graded as without them."""
    from trajgrade.formats.native import NativeReader

    real = NativeReader.feed_decoded

    def feed(self: NativeReader, buf: Any, first: int, *args: Any, **kw: Any) -> Any:
        if b"boom" in bytes(buf):
            raise KeyError("boom")
        return real(self, buf, first, *args, **kw)

    monkeypatch.setattr(NativeReader, "feed_decoded", feed)
    s = suite(POLICY)
    bomb = _line(type="tool_call", trace_id="x", name="boom", call_id="9")
    got = grade_bytes(s, _clean("a") + bomb + _clean("b"), source="k.jsonl")
    finals = _finals(got.verdicts)
    assert finals[("a", "rx")] == finals[("b", "rx")] == "pass"
    assert finals[("x", "rx")] == "error"
    [err] = got.errors
    assert (err.location.line, err.trace_id) == (4, "x")
    assert "could not be read (KeyError" in err.message


@pytest.mark.slow
def test_ctrl_c_reports_no_unread_line_as_broken(work: Path) -> None:
    """SIGINT while a line is half written: the half is unread, not broken
    (no input_rejected, no error verdict), and every trace is closed once."""
    import signal
    import time

    argv = ["grade", "-c", "p.yaml", "--output", "jsonl", "--log-level", "info", "-"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "trajgrade", *argv],
        cwd=work,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(_clean("a") + _line(type="turn_start", trace_id="b"))
    half = _line(type="tool_call", trace_id="b", name="bash", call_id="1")
    proc.stdin.write(half[:20])
    proc.stdin.flush()
    first = proc.stdout.readline()  # trace a's verdicts: everything was read
    assert json.loads(first)["trace_id"] == "a"
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    proc.stdin.close()
    assert b"input_rejected" not in err, err.decode()
    verdicts = [json.loads(first)] + [json.loads(x) for x in out.splitlines()]
    finals = [(v["trace_id"], v["grader"]) for v in verdicts if v["final"]]
    assert len(finals) == len(set(finals))
    assert not [v for v in verdicts if v["outcome"] == "error"]


@pytest.mark.parametrize(
    "data",
    [
        b'{"a":"\xed\xa0\x80", "b": [1,\n2]}\n',  # found by the long fuzz run
        b'{"schema_version":"ATIF-v1.7","session_id":"x","steps":[{"message":"\xed\xa0\x80"\n}]}\n',
        b"[\xff\n]\n",
    ],
)
def test_invalid_utf8_in_a_json_document_is_a_located_error(data: bytes) -> None:
    got = grade_bytes(suite(POLICY), data, source="doc.json")
    assert got.errors
    assert all(e.location.file == "doc.json" for e in got.errors)


def test_a_stop_after_only_rejected_records_is_not_a_pass(work: Path) -> None:
    """SIGTERM to a follower that read nothing but records it rejected:
    exit 5 (nothing graded), as the same file graded whole; it was 0, a
    false green for a service fed garbage. Stopped before any record, 0."""
    import signal
    import time

    (work / "g.jsonl").write_bytes(b"garbage\nmore garbage\n")
    (work / "empty.jsonl").write_bytes(b"")
    statuses = []
    for name, seen in (
        ("g.jsonl", b"input_rejected"),
        ("empty.jsonl", b"follow_started"),
    ):
        argv = ["grade", "-c", "p.yaml", "--log-level", "info", "--follow", name]
        proc = subprocess.Popen(
            [sys.executable, "-m", "trajgrade", *argv],
            cwd=work,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert proc.stderr is not None
        err = b""
        deadline = time.monotonic() + 30
        while seen not in err and time.monotonic() < deadline:
            err += proc.stderr.readline()
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
        statuses.append(proc.returncode)
    assert statuses == [5, 0]
