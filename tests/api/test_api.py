"""The embedding API: StreamGrader.feed/finish, checkpoints, async streams."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trajgrade import (
    ConfigError,
    InputError,
    OnFail,
    Outcome,
    StreamGrader,
    ToolCall,
    TraceEnd,
    Verdict,
    grade_bytes,
)

pytestmark = pytest.mark.anyio

STREAM = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "claude-code"
    / "live_v2.1.197_stream.jsonl"
)
POLICY = """\
graders:
  - type: tool-calls
    name: no-hostname
    config:
      disallowed: [{name: Bash, command: "cat /etc/hostname"}]
  - type: token-budget
    config: {max: 100000}
"""


@pytest.fixture
def anyio_backend() -> str:
    """anyio runs on asyncio (aiokafka needs it)."""
    return "asyncio"


def _key(verdicts: list[Verdict]) -> list[tuple[Any, ...]]:
    return [(v.trace_id, v.grader, v.outcome, v.score, v.final) for v in verdicts]


def _batch() -> list[Verdict]:
    return grade_bytes(
        StreamGrader.from_text(POLICY).suite, STREAM.read_bytes()
    ).verdicts


def test_feed_events_gives_early_and_final_verdicts() -> None:
    """A disallowed call fails at once; finish() closes the other graders."""
    grader = StreamGrader.from_text(POLICY)
    early = grader.feed(
        ToolCall(
            trace_id="t",
            name="Bash",
            call_id="c",
            args={"command": "cat /etc/hostname"},
        )
    )
    assert [(v.grader, v.outcome, v.final) for v in early] == [
        ("no-hostname", Outcome.FAIL, True)
    ]
    closing = grader.feed(TraceEnd(trace_id="t"))
    assert [(v.grader, v.outcome, v.final) for v in closing] == [
        ("token-budget", Outcome.PASS, True)
    ]


def test_trace_end_closes_the_trace() -> None:
    """trace_end gives every open grader of that trace its final verdict."""
    grader = StreamGrader.from_text(POLICY)
    grader.feed(
        ToolCall(trace_id="t", name="Bash", call_id="c", args={"command": "ls"})
    )
    closing = grader.feed(TraceEnd(trace_id="t"))
    assert [(v.grader, v.outcome, v.final) for v in closing] == [
        ("no-hostname", Outcome.PASS, True),
        ("token-budget", Outcome.PASS, True),
    ]
    assert grader.finish() == []


@pytest.mark.parametrize("kind", ["mapping", "str", "bytes"])
def test_feeding_records_one_by_one_equals_batch_grading(kind: str) -> None:
    """Claude Code stream-json records fed as dicts, str or bytes lines give
    exactly the verdicts of grading the file."""
    grader = StreamGrader.from_text(POLICY)
    got: list[Verdict] = []
    for line in STREAM.read_bytes().splitlines():
        item: Any = {"mapping": json.loads(line), "str": line.decode(), "bytes": line}[
            kind
        ]
        got.extend(grader.feed(item))
    got.extend(grader.finish())
    assert _key(got) == _key(_batch())
    assert not grader.errors


def test_feed_bytes_frames_lines_across_any_chunking() -> None:
    """Chunks cutting lines anywhere give the same verdicts as the whole file."""
    data = STREAM.read_bytes()
    grader = StreamGrader.from_text(POLICY)
    got: list[Verdict] = []
    for i in range(0, len(data), 97):
        got.extend(grader.feed_bytes(data[i : i + 97], source="cc"))
    got.extend(grader.finish())
    assert _key(got) == _key(_batch())


def test_a_bad_record_is_reported_not_raised() -> None:
    """An undecodable line is kept in errors, located, and taints its trace."""
    grader = StreamGrader.from_text(POLICY, source="live")
    lines = STREAM.read_bytes().splitlines()
    grader.feed(lines[0])
    assert (
        grader.feed(
            b'{"type": "assistant", "session_id": "837bc8f9-2f48-4ff9-a9c7-d83735145d09", "message": 5}'
        )
        == []
    )
    [err] = grader.errors
    assert isinstance(err, InputError) and err.location.file == "live"
    assert err.location.line == 2
    finals = grader.finish()
    assert {v.outcome for v in finals} == {Outcome.ERROR}


def test_feed_refuses_several_lines_and_other_types() -> None:
    """feed() takes one record; the messages say what to use instead."""
    grader = StreamGrader.from_text(POLICY)
    with pytest.raises(ValueError, match=r"pass several lines .* to feed_bytes"):
        grader.feed('{"a": 1}\n{"b": 2}\n')
    with pytest.raises(TypeError, match="cannot grade a int; feed an Event"):
        grader.feed(5)  # type: ignore[arg-type]


def test_on_fail_and_should_stop_follow_the_policy_marks() -> None:
    """should_stop is true for abort/deny-marked fails, never for errors or passes."""
    text = POLICY.replace("name: no-hostname", "name: no-hostname\n    on_fail: deny")
    grader = StreamGrader.from_text(text)
    [fail] = grader.feed(
        ToolCall(
            trace_id="t",
            name="Bash",
            call_id="c",
            args={"command": "cat /etc/hostname"},
        )
    )
    assert grader.on_fail(fail) is OnFail.DENY
    assert grader.should_stop(fail)
    assert not grader.should_stop(fail, deny_stops=False)
    [*_, budget] = grader.finish()
    assert budget.outcome is Outcome.PASS and grader.on_fail(budget) is None


def test_checkpoint_and_restore_continue_where_it_stopped() -> None:
    """A checkpoint taken mid-stream, restored into a new grader, gives the
    verdicts of an uninterrupted run."""
    lines = STREAM.read_bytes().splitlines()
    first = StreamGrader.from_text(POLICY)
    got: list[Verdict] = []
    for line in lines[:12]:
        got.extend(first.feed(line))
    saved = first.checkpoint()
    second = StreamGrader.from_text(POLICY)
    second.restore(saved)
    for line in lines[12:]:
        got.extend(second.feed(line))
    got.extend(second.finish())
    assert _key(got) == _key(_batch())


def test_restore_refuses_another_policys_checkpoint() -> None:
    """A checkpoint of another config is refused, naming both fingerprints."""
    saved = StreamGrader.from_text(POLICY).checkpoint()
    other = StreamGrader.from_text(
        "graders:\n  - {type: turn-count, config: {max: 3}}\n"
    )
    with pytest.raises(ConfigError, match="checkpoint was taken with another policy"):
        other.restore(saved)
    with pytest.raises(InputError, match="not a StreamGrader checkpoint"):
        other.restore(b"junk")


def test_from_file_reports_config_errors_with_their_place(tmp_path: Path) -> None:
    """from_file raises the located ConfigError a broken policy gives."""
    path = tmp_path / "policy.yaml"
    path.write_text("graders:\n  - type: tool-calls\n    on_fail: later\n")
    with pytest.raises(ConfigError, match=r"policy.yaml:3: graders\[0\].on_fail"):
        StreamGrader.from_file(path)


@pytest.mark.slow
async def test_grade_stream_over_a_real_pipe() -> None:
    """The async iterator grades a child process's stdout as it arrives."""
    import anyio

    grader = StreamGrader.from_text(POLICY)
    async with await anyio.open_process(
        [
            sys.executable,
            "-c",
            f"import sys; sys.stdout.buffer.write(open({str(STREAM)!r}, 'rb').read())",
        ],
        stdout=subprocess.PIPE,
    ) as proc:
        assert proc.stdout is not None
        got = [v async for v in grader.grade_stream(proc.stdout, source="cc")]
    assert _key(got) == _key(_batch())


async def test_grade_stream_to_fires_wall_time_between_items() -> None:
    """With the callback variant a wall-time budget fails while the source is idle."""
    import anyio

    grader = StreamGrader.from_text(
        "graders:\n  - {type: wall-time, config: {max: 100ms}}\n"
    )
    seen: list[str] = []
    first_verdict = anyio.Event()

    async def items() -> Any:
        yield ToolCall(trace_id="t", name="ls", call_id="c")
        with anyio.fail_after(10):  # no verdict while idle: the test fails here
            await first_verdict.wait()
        seen.append("second item")
        yield TraceEnd(trace_id="t")

    async def on_verdict(v: Verdict) -> None:
        seen.append(f"{v.outcome} final={v.final}")
        first_verdict.set()

    await grader.grade_stream_to(items(), on_verdict, tick_interval=0.01)
    assert seen[0] == "fail final=False"
    assert seen[1] == "second item"
    assert seen[-1] == "fail final=True"
