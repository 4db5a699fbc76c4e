"""A ``--state DIR`` that fails under a run: full disk, damaged checkpoint,
a followed file replaced by a FIFO while trajgrade was down.

A full disk is a real write limit: the child process runs under
``RLIMIT_FSIZE`` (Python ignores SIGXFSZ, so a write past it fails with
EFBIG, as a full disk fails with ENOSPC). Real ``python -m trajgrade``
processes throughout.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

POLICY = """\
graders:
  - type: tool-calls
    name: no-fetch
    config:
      disallowed: ["^web_fetch$"]
  - type: turn-count
    config: {max: 6}
"""


def _corpus(n: int, *, end: bool) -> bytes:
    out = []
    for t in range(n):
        tid = f"t{t:04d}"
        for i in range(3):
            out.append({"trace_id": tid, "type": "turn_start"})
            name = "web_fetch" if t % 3 == 0 else "bash"
            out.append(
                {"trace_id": tid, "type": "tool_call", "name": name, "call_id": f"c{i}"}
            )
        if end:
            out.append({"trace_id": tid, "type": "trace_end"})
    return b"".join(json.dumps(e).encode() + b"\n" for e in out)


_GRADE = (sys.executable, "-m", "trajgrade", "grade", "-q", "--output", "jsonl")


def _grade(
    cwd: Path, *args: str, fsize: int | None = None
) -> subprocess.CompletedProcess[bytes]:
    def limit() -> None:
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    return subprocess.run(
        [*_GRADE, "-c", "p.yaml", *args],
        cwd=cwd,
        capture_output=True,
        preexec_fn=limit,
        timeout=20,
        check=False,
    )


def _ids(out: bytes) -> list[str]:
    return [json.loads(line)["id"] for line in out.splitlines()]


@pytest.mark.parametrize(
    ("what", "end", "failing"),
    [
        ("journal", True, "emitted.0"),  # verdicts, few open traces
        ("checkpoint", False, "checkpoint.msgpack"),  # open traces, no verdicts
    ],
)
def test_a_full_state_disk_stops_with_the_file_and_the_fix_then_resumes(
    tmp_path: Path, what: str, end: bool, failing: str
) -> None:
    """Exit 2 naming the file that could not be written and what to do, no
    traceback, no partial temporary file left; after space is freed the same
    command continues, and the two runs' verdicts are the uninterrupted run's."""
    (tmp_path / "p.yaml").write_text(POLICY)
    (tmp_path / "log.jsonl").write_bytes(_corpus(1500, end=end))
    ref = _grade(tmp_path, "log.jsonl")
    state = ("--state", "s", "--checkpoint-interval", "0.01", "log.jsonl")
    full = _grade(tmp_path, *state, fsize=16_000)
    err = full.stderr.decode()
    assert full.returncode == 2, err
    assert "Traceback" not in err
    assert f"s/{failing}: cannot write durable state" in err, err
    assert "free space or fix permissions on the --state DIR" in err
    assert not [p.name for p in (tmp_path / "s").iterdir() if p.name.endswith(".tmp")]
    again = _grade(tmp_path, *state)
    assert again.returncode == ref.returncode, again.stderr.decode()
    first, second = _ids(full.stdout), _ids(again.stdout)
    assert set(first + second) == set(_ids(ref.stdout)), what
    # Only what was written after the last journal write that went through
    # (the batch whose journal write failed) comes again: a tail of the
    # first run's output, never verdicts from before it.
    repeated = set(first) & set(second)
    assert repeated == set(first[len(first) - len(repeated) :])
    assert len(repeated) < len(first) // 2


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "damaged or not a trajgrade checkpoint"),  # cut short
        (b"\x85\xa7version\x01\xaafinger", "damaged or not a trajgrade checkpoint"),
        (b"garbage\n" * 10, "damaged or not a trajgrade checkpoint"),
    ],
)
def test_a_damaged_checkpoint_names_the_file_and_the_fix(
    tmp_path: Path, content: bytes, message: str
) -> None:
    (tmp_path / "p.yaml").write_text(POLICY)
    (tmp_path / "log.jsonl").write_bytes(_corpus(3, end=True))
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "checkpoint.msgpack").write_bytes(content)
    p = _grade(tmp_path, "--state", "s", "log.jsonl")
    err = p.stderr.decode()
    assert p.returncode == 2, err
    assert message in err
    assert "delete s/checkpoint.msgpack to start over" in err
    assert p.stdout == b""


def test_a_followed_file_replaced_by_a_fifo_while_down_does_not_hang(
    tmp_path: Path,
) -> None:
    """The restart looks at the checkpointed file without blocking on a FIFO
    that has no writer: it stops at once with the path and the reason."""
    (tmp_path / "p.yaml").write_text(POLICY)
    log = tmp_path / "log.jsonl"
    log.write_bytes(_corpus(2, end=False))
    follow = ("--follow", "log.jsonl", "--state", "s", "--checkpoint-interval", "0.01")
    args = [sys.executable, "-m", "trajgrade", "grade", "-c", "p.yaml", *follow]
    p = subprocess.Popen(args, cwd=tmp_path, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        checkpoint = tmp_path / "s" / "checkpoint.msgpack"
        while not checkpoint.is_file() and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        p.kill()
        p.wait()
    log.unlink()
    os.mkfifo(log)
    try:
        again = _grade(tmp_path, *follow)
    except subprocess.TimeoutExpired:
        pytest.fail("the restart hung opening the FIFO")
    err = again.stderr.decode()
    assert again.returncode == 2, err
    assert "log.jsonl: is not a regular file" in err


def test_a_checkpoint_a_killed_run_was_writing_is_cleared(tmp_path: Path) -> None:
    """kill -9 during a checkpoint write leaves its temporary copy; the next
    run (holding the lock) removes it instead of keeping it for ever."""
    (tmp_path / "p.yaml").write_text(POLICY)
    (tmp_path / "log.jsonl").write_bytes(_corpus(3, end=True))
    (tmp_path / "s").mkdir()
    stale = tmp_path / "s" / ".checkpoint.msgpack.4242.tmp"
    stale.write_bytes(b"\x85partial")
    p = _grade(tmp_path, "--state", "s", "log.jsonl")
    assert p.returncode == 1, p.stderr.decode()
    assert not stale.exists()
    assert (tmp_path / "s" / "checkpoint.msgpack").is_file()


def test_no_checkpoint_records_verdicts_a_failed_write_lost(tmp_path: Path) -> None:
    """The torn-emit race, driven in order: the verdict sink is ``/dev/full``
    (every flush fails with ENOSPC, as a full disk does), the write fails
    part-way through grading a chunk, and a checkpoint is asked for right
    after, as the run's clock task can do before the failure stops the run.
    No checkpoint may be written then (it would record as read the chunk
    whose verdicts never reached the sink); the resumed run says them all."""
    import anyio
    from tests._support import suite as compile_suite

    from trajgrade.runner.options import RunOptions
    from trajgrade.runner.run_state import _Run
    from trajgrade.runtime.log import get_logger
    from trajgrade.sinks.jsonl import JsonlSink
    from trajgrade.sinks.tee import TeeSink

    (tmp_path / "p.yaml").write_text(POLICY)
    log = tmp_path / "log.jsonl"
    log.write_bytes(_corpus(40, end=True))
    ref = _grade(tmp_path, "log.jsonl")
    state = tmp_path / "s"
    options = RunOptions(inputs=[str(log)], state_dir=str(state))
    with open("/dev/full", "wb") as full:
        run = _Run(
            compile_suite(POLICY), options, TeeSink(JsonlSink(full), []), get_logger()
        )
        run.open_state()
        try:
            tracked = run.tracked(str(log), str(log), "log.jsonl")
            with pytest.raises(OSError, match="No space left"):
                run.take(tracked, log.read_bytes())
            anyio.run(run.checkpoint)
        finally:
            assert run.store is not None
            run.store.close()
    assert not (state / "checkpoint.msgpack").exists()
    again = _grade(tmp_path, "--state", "s", "log.jsonl")
    assert again.returncode == ref.returncode, again.stderr.decode()
    assert sorted(_ids(again.stdout)) == sorted(_ids(ref.stdout))
