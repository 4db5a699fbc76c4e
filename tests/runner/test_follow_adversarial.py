"""``trajgrade grade --follow/--watch`` against what log rotation and people do
to live files: real ``python -m trajgrade`` processes, real files, a writer
that keeps its descriptor as agents do. Each test states the verdict the
whole session deserves and checks the follower reaches it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

POLICY = """\
graders:
  - type: turn-count
    config: {max: 2}
"""
TURN = b'{"type": "turn_start"}\n'  # no trace id: the file's own trace
PATIENCE = 20.0
GRADE = (sys.executable, "-m", "trajgrade", "grade", "--output", "jsonl")


class Follower:
    """``trajgrade grade`` on live inputs; stdout and stderr collected as they come."""

    def __init__(self, cwd: Path, *args: str) -> None:
        (cwd / "p.yaml").write_text(POLICY)
        self.proc = subprocess.Popen(
            [*GRADE, "-c", "p.yaml", "--idle-timeout", "0", *args],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.out: list[dict[str, Any]] = []
        self.err: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, args=(stream, into), daemon=True)
            for stream, into in ((self.proc.stdout, self.out), (self.proc.stderr, None))
        ]
        for reader in self._readers:
            reader.start()
        self.until(lambda: any("follow_started" in e for e in self.err))

    def _read(self, stream: Any, into: list[dict[str, Any]] | None) -> None:
        with stream:
            for line in stream:
                if into is None:
                    self.err.append(line.decode())
                else:
                    into.append(json.loads(line))

    def until(self, cond: Any) -> None:
        deadline = time.monotonic() + PATIENCE
        while not cond():
            assert time.monotonic() < deadline, (self.out, self.err)
            assert self.proc.poll() is None, self.err
            time.sleep(0.01)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(PATIENCE)
        for reader in self._readers:
            reader.join(PATIENCE)

    def fail_at(self) -> list[int]:
        return [v["at_event"] for v in self.out if v["outcome"] == "fail"]


def test_logrotate_create_grades_what_the_writer_adds_before_it_reopens(
    tmp_path: Path,
) -> None:
    """rename + empty new file while the agent holds the old one mid-line: the
    rest of its line and its next turn (written to the renamed file) are
    graded, in order, before the new file; nothing is reported broken."""
    log = tmp_path / "agent.jsonl"
    with log.open("ab", buffering=0) as writer:
        writer.write(TURN + TURN[:9])
        f = Follower(tmp_path, "--follow", "agent.jsonl")
        try:
            time.sleep(0.1)
            os.rename(log, tmp_path / "agent.jsonl.1")
            log.write_bytes(b"")
            time.sleep(0.1)  # the follower has seen the empty new file
            writer.write(TURN[9:] + TURN)  # turns 2 and 3, in the renamed file
            f.until(lambda: f.fail_at() == [3])
        finally:
            f.stop()
    assert not any("input_rejected" in e for e in f.err), f.err


def test_a_followed_path_deleted_and_created_again_continues_its_trace(
    tmp_path: Path,
) -> None:
    """``tail -F`` treats the path as the stream: turns in a file created
    again at a deleted --follow path count in the same trace (they used to
    be dropped as events of an ended trace, without a word)."""
    log = tmp_path / "agent.jsonl"
    log.write_bytes(TURN)
    f = Follower(tmp_path, "--follow", "agent.jsonl")
    try:
        time.sleep(0.1)
        log.unlink()
        f.until(lambda: any("follow_deleted" in e for e in f.err))
        log.write_bytes(TURN * 2)
        f.until(lambda: f.fail_at() == [3])
    finally:
        f.stop()
    assert {v["trace_id"] for v in f.out} == {"agent.jsonl"}


def test_a_resume_after_a_part_line_keeps_the_files_identity(tmp_path: Path) -> None:
    """Stopped while the log ends in half a line (within its first 4 KiB),
    resumed, stopped again: the second checkpoint still names the file, so
    a third run continues it instead of reading it again from the start
    (which counted every turn twice: a false fail)."""
    log = tmp_path / "agent.jsonl"
    follow = (
        "--follow",
        "agent.jsonl",
        "--state",
        "s",
        "--checkpoint-interval",
        "0.01",
    )
    log.write_bytes(TURN + TURN[:7])
    for more in (b"", TURN[7:]):
        f = Follower(tmp_path, *follow)
        try:
            time.sleep(0.2)  # (it has read and checkpointed what is there)
            with log.open("ab") as out:
                out.write(more)
            time.sleep(0.2)
        finally:
            f.stop()
        assert f.out == []  # two turns: within the budget
    f = Follower(tmp_path, *follow)
    try:
        with log.open("ab") as out:
            out.write(TURN)
        f.until(lambda: f.fail_at() == [3])
    finally:
        f.stop()
    assert not any("source_tail_lost" in e or "source_changed" in e for e in f.err)


def test_a_first_run_killed_soon_after_start_finds_its_rotated_log(
    tmp_path: Path,
) -> None:
    """A new ``--state`` run checkpoints the files it opened at once, not
    after the first interval: killed, the log rotated, the restart finds the
    old file and grades its turns with the new file's."""
    log = tmp_path / "agent.jsonl"
    log.write_bytes(TURN)
    follow = (
        "--follow",
        "agent.jsonl",
        "--state",
        "s",
        "--checkpoint-interval",
        "3600",
    )
    f = Follower(tmp_path, *follow)
    try:
        f.until((tmp_path / "s" / "checkpoint.msgpack").exists)
    finally:
        f.proc.kill()
        f.stop()
    os.rename(log, tmp_path / "agent.jsonl.1")
    log.write_bytes(TURN * 2)
    f = Follower(tmp_path, *follow)
    try:
        f.until(lambda: f.fail_at() == [3])
    finally:
        f.stop()
    assert any("source_tail_recovered" in e for e in f.err)


def test_a_file_renamed_under_watch_is_read_on_not_again(tmp_path: Path) -> None:
    """A session file renamed to a name the glob also matches (a dated
    rotation) is the same file: read on where it stopped, in its own trace,
    also after a restart (it used to be read again from its start as a new
    file, every turn counted twice)."""
    sessions = tmp_path / "w"
    sessions.mkdir()
    (sessions / "a.jsonl").write_bytes(TURN * 2)
    watch = ("--watch", "w", "--glob", "*.jsonl", "--state", "s")
    f = Follower(tmp_path, *watch, "--checkpoint-interval", "0.01")
    try:
        time.sleep(0.1)
        os.rename(sessions / "a.jsonl", sessions / "a-20260101.jsonl")
        f.until(lambda: any("follow_renamed" in e for e in f.err))
    finally:
        f.stop()
    assert f.out == []
    f = Follower(tmp_path, *watch)
    try:
        with (sessions / "a-20260101.jsonl").open("ab") as out:
            out.write(TURN)
        f.until(lambda: f.fail_at() == [3])
        time.sleep(0.2)
    finally:
        f.stop()
    assert {v["trace_id"] for v in f.out} == {"w/a.jsonl"}
    assert f.fail_at() == [3]


def test_a_watched_file_deleted_and_created_again_is_a_new_trace(
    tmp_path: Path,
) -> None:
    """A --watch file's trace ends when the file is deleted; a file created
    again under its name is graded as a trace of its own, ``#2`` (its turns
    used to go to the ended trace, dropped as late: a failing session got
    no verdict at all)."""
    sessions = tmp_path / "w"
    sessions.mkdir()
    (sessions / "a.jsonl").write_bytes(TURN)
    f = Follower(tmp_path, "--watch", "w", "--glob", "*.jsonl")
    try:
        time.sleep(0.1)
        (sessions / "a.jsonl").unlink()
        f.until(lambda: any(v["trace_id"] == "w/a.jsonl" for v in f.out))
        (sessions / "a.jsonl").write_bytes(TURN * 3)
        f.until(lambda: f.fail_at() == [3])
    finally:
        f.stop()
    assert [(v["trace_id"], v["outcome"]) for v in f.out if v["final"]] == [
        ("w/a.jsonl", "pass"),
        ("w/a.jsonl#2", "fail"),
    ]
