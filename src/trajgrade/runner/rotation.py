"""Followed files after a restart: resume the same file, or find where it went.

A checkpoint names each followed file by path *and* identity (device, inode,
digest of its first bytes). At a restart (``--follow --state``) each path is
checked:

* the path still names that file: reading resumes at the checkpoint's offset;
* it does not (the log was rotated, or deleted, while trajgrade was down):
  the file is looked for by its device and inode in the path's directory,
  where rotation leaves it (``session.jsonl`` -> ``session.jsonl.1``). Found,
  its unread tail is read to its end into the same trace, as if it had been
  followed through the rotation; the new file at the path is then read from
  its start. A ``copytruncate`` copy (another inode, the same first bytes,
  the only one in the directory) counts as that file. Gone (deleted, or
  compressed), the tail is lost:
  the input's trace is tainted, so its open graders end in ``error`` naming
  the reason, never in a verdict computed without those events.

The taint falls on the input's own trace (``--trace-id``, by default its
path); records that name other traces are not known without reading them.
"""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING, Any

from trajgrade.runner.store import head_digest
from trajgrade.runner.tracking import identity_matches
from trajgrade.sources.stream import CHUNK_BYTES, trace_name

if TYPE_CHECKING:
    from trajgrade.runner.store import Position

__all__ = ("find_by_identity", "live_start", "recover")


def live_start(run: Any) -> dict[str, tuple[Any, int]]:
    """Resume offsets for LiveFiles (only files provably the same); the tails
    of files replaced while down are read, or their traces tainted, here."""
    from trajgrade.sources.live import FileId

    start: dict[str, tuple[Any, int]] = {}
    for key, pos in list(run.resume_from.items()):
        try:
            fd = os.open(key, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not block
        except OSError:
            fd = None
        if fd is not None:
            try:
                if identity_matches(fd, pos) and not pos.done:
                    start[key] = (FileId(dev=pos.dev, ino=pos.ino), pos.offset)
                    continue
            finally:
                os.close(fd)
        del run.resume_from[key]
        if not pos.done:
            _recover(run, pos, given=_given_name(run, key))
    return start


def recover(run: Any, key: str, pos: Position) -> None:
    """The file ``pos`` covers was replaced after :func:`live_start` looked
    (rotated in between): read its tail, or taint its trace, as there."""
    if not pos.done and pos.offset:
        _recover(run, pos, given=_given_name(run, key))


def find_by_identity(pos: Position) -> str | None:
    """A path in ``pos.source``'s directory naming the file ``pos`` was read
    from (same device, inode and first bytes), or None.

    Failing that, the one copy of it there (``copytruncate`` copies the log,
    then truncates it in place): another regular file at least as long, with
    the same first bytes. Two such copies are ambiguous: None.
    """
    directory = os.path.dirname(pos.source) or "."
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return None
    copies = []
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        same = (st.st_dev, st.st_ino) == (pos.dev, pos.ino)
        if not same and not (
            stat.S_ISREG(st.st_mode)
            and pos.head_len > 0
            and st.st_size >= pos.offset
            and os.path.abspath(entry.path) != os.path.abspath(pos.source)
        ):
            continue
        try:
            fd = os.open(entry.path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            if same and identity_matches(fd, pos):
                return entry.path
            if not same and _same_head(fd, pos):
                copies.append(entry.path)
        finally:
            os.close(fd)
    return copies[0] if len(copies) == 1 else None


def _same_head(fd: int, pos: Position) -> bool:
    head = os.pread(fd, pos.head_len, 0)
    return len(head) == pos.head_len and head_digest(head) == pos.head


def _given_name(run: Any, key: str) -> str:
    """The input as the user named it (the default trace id is built from it)."""
    for name in run.options.inputs:
        if os.path.abspath(name) == key:
            return str(name)
    return key


def _recover(run: Any, pos: Position, *, given: str) -> None:
    trace = trace_name(run.options.trace_template, given)
    moved = find_by_identity(pos)
    if moved is None:
        reason = (
            f"{given} was replaced while trajgrade was down and the file it was "
            f"read from (unread from byte {pos.offset:,}) is gone"
        )
        run.engine.reject(trace, reason)
        run.summary.input_errors += 1
        run.log.warning(
            "source_tail_lost",
            source=given,
            trace=trace,
            offset=pos.offset,
            reason=reason
            + "; rotate by renaming within the directory and keep the old file until it was read",
        )
        return
    tracked = run.tracked(given, pos.source, trace)
    tracked.dev, tracked.ino = pos.dev, pos.ino
    fd = os.open(moved, os.O_RDONLY)
    try:
        tracked.resume(fd, pos)
        while chunk := os.read(fd, CHUNK_BYTES):
            run.take(tracked, chunk)
    finally:
        os.close(fd)
    run.end_input(tracked)
    run.log.info(
        "source_tail_recovered",
        source=given,
        rotated_to=moved,
        offset=pos.offset,
        bytes=tracked.decoder.offset - pos.offset,
    )
