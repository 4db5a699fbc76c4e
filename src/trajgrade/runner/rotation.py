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
  compressed), the tail is lost: the traces the file's records fed (the
  checkpoint names them) are tainted, so their open graders end in
  ``error`` naming the reason and the lost range, never in a verdict
  computed without those events;
* then the files rotated after it and before the one now at the path (two
  rotations while down: ``session.jsonl.1`` was the new file of the first)
  are read whole, oldest write first;
* the path names another inode with the same content up to the offset (the
  same first bytes, and the old inode gone: replaced by an identical copy):
  reading resumes at the offset, nothing is counted twice.
"""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING, Any

import msgspec

from trajgrade.runner.store import head_digest
from trajgrade.runner.tracking import identity_matches
from trajgrade.sources._lineage import rotated_since
from trajgrade.sources.stream import CHUNK_BYTES, trace_name

if TYPE_CHECKING:
    from trajgrade.runner.store import Position

__all__ = ("find_by_identity", "live_start", "recover", "taint_lost")


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
                if not pos.done and _identical_copy(fd, pos):
                    st = os.fstat(fd)
                    run.log.info("source_replaced_by_a_copy", source=key)
                    pos = msgspec.structs.replace(pos, dev=st.st_dev, ino=st.st_ino)
                    run.resume_from[key] = pos
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


def _identical_copy(fd: int, pos: Position) -> bool:
    """Whether ``fd`` (another inode) is a copy put in place of the file
    ``pos`` was read from: as long, the same first bytes, and that file no
    longer in the directory (renamed away, it would be a rotation)."""
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) == (pos.dev, pos.ino) or st.st_size < pos.offset:
        return False
    if not pos.head_len or not _same_head(fd, pos):
        return False
    directory = os.path.dirname(pos.source) or "."
    try:
        if os.stat(directory).st_dev != pos.dev:
            return True  # (another file system: the old inode is not there)
        with os.scandir(directory) as entries:
            return not any(e.inode() == pos.ino for e in entries)
    except OSError:
        return False


def taint_lost(run: Any, traces: list[str], overflow: bool, reason: str) -> None:
    """Events of an input were lost unread: the open traces it fed (every
    open trace, if it fed more than it could remember) end in ``error``
    with ``reason``, never in a verdict computed without them."""
    if overflow:
        traces = [*traces, *run.engine.open_traces()]
    for trace in dict.fromkeys(traces):
        run.engine.reject(trace, reason)
    run.summary.input_errors += 1
    run.log.warning("source_tail_lost", traces=traces[:20], reason=reason)


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
    trace = pos.trace or trace_name(run.options.trace_template, given)
    moved = find_by_identity(pos)
    skip = {(pos.dev, pos.ino)}
    if moved is None:
        reason = (
            f"{given} was replaced while trajgrade was down and the file it was "
            f"read from (unread from byte {pos.offset:,} of {given}, device "
            f"{pos.dev} inode {pos.ino}) is gone; rotate by renaming within the "
            "directory and keep the old file until it was read"
        )
        taint_lost(run, pos.traces or [trace], pos.traces_overflow, reason)
        since = int(run.resumed_at * 1e9)
    else:
        tracked = _read(run, given, moved, trace, pos)
        st = os.stat(moved)
        since, skip = st.st_mtime_ns, {*skip, (st.st_dev, st.st_ino)}
        run.log.info(
            "source_tail_recovered",
            source=given,
            rotated_to=moved,
            offset=pos.offset,
            bytes=tracked.decoder.offset - pos.offset,
        )
    try:
        now = os.stat(pos.source)
        skip.add((now.st_dev, now.st_ino))
    except OSError:
        pass
    # Rotated after it while down (two rotations): read before the new file.
    for path in rotated_since(pos.source, since, skip):
        run.log.info("source_rotated_unseen", source=given, file=path)
        _read(run, given, path, trace, None)


def _read(run: Any, given: str, path: str, trace: str, pos: Position | None) -> Any:
    """Read ``path`` to its end into ``trace`` (from ``pos``, if given)."""
    tracked = run.tracked(given, os.path.abspath(given), trace)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        tracked.dev, tracked.ino = st.st_dev, st.st_ino
        if pos is not None:
            tracked.dev, tracked.ino = pos.dev, pos.ino
            tracked.resume(fd, pos)
        while chunk := os.read(fd, CHUNK_BYTES):
            run.take(tracked, chunk)
    finally:
        os.close(fd)
    run.end_input(tracked)
    return tracked
