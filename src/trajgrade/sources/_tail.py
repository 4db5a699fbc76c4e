"""One followed path and the file read through it: reading to the end,
noticing a truncation, and finding content a rotation moved away.

:class:`~trajgrade.sources.live.LiveFiles` decides *when* to read a path;
this module reads it. After a truncation the unread rest of the old content
is read from its copy, else reported :class:`~trajgrade.sources.pieces.Lost`;
files a rename rotation moved away unseen are read before the new one.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from trajgrade.sources._lineage import HEAD_BYTES, MARK_BYTES, find_copy, rotated_since
from trajgrade.sources.pieces import Closed, Data, FileId, Lost, Opened, Piece
from trajgrade.sources.stream import CHUNK_BYTES

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = (
    "HEAD_BYTES",
    "MARK_BYTES",
    "Tail",
    "close_tail",
    "drain",
    "old_content",
    "restart_if_truncated",
    "skipped",
    "switch_to_copy",
    "truncated",
)

#: How the reader logs (``LiveFiles._info``).
Info = Callable[..., Any]


class Tail:
    """One followed path and the file currently read through it."""

    __slots__ = (
        "complained",
        "fd",
        "file",
        "given",
        "head",
        "mark",
        "offset",
        "path",
        "real",
    )

    def __init__(self, path: str, real: str, *, given: bool) -> None:
        self.path = path  # as reported in pieces
        self.real = real  # absolute, for I/O and notifications
        self.given = given  # --follow: wait for it when it is missing
        self.fd: int | None = None
        self.file: FileId | None = None  # the file being read, open or parked
        self.offset = 0
        self.mark = b""  # the last bytes before offset, to notice a rewrite
        self.head = b""  # the file's first bytes, to recognise its copy
        self.complained: str | None = None  # the problem logged last, once each


def restart_if_truncated(tail: Tail, info: Info) -> Iterator[Piece]:
    """If the open file was truncated (see :func:`truncated`): the unread
    rest of its old content, ``Closed("truncated")``, and reading again
    from its start."""
    if tail.file is None or not truncated(tail):
        return
    info("follow_truncated", path=tail.path, offset=tail.offset)
    yield from old_content(tail, info)
    yield Closed(tail.path, "truncated")
    tail.offset, tail.mark, tail.head = 0, b"", b""
    yield Opened(tail.path, tail.file, 0)


def old_content(tail: Tail, info: Info) -> Iterator[Piece]:
    """A truncated file's unread rest: read from its copy (``copytruncate``
    copies, then truncates), or reported ``Lost``."""
    assert tail.file is not None
    file = (tail.file.dev, tail.file.ino)
    copy = find_copy(tail.real, tail.head, tail.offset, tail.mark, file)
    fd = None
    if copy is not None:
        try:
            fd = os.open(copy, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            fd = None
    if fd is None:
        info("follow_tail_lost", path=tail.path, offset=tail.offset)
        yield Lost(
            tail.path,
            tail.offset,
            f"{tail.path} was truncated with bytes from {tail.offset:,} on "
            "unread, and no copy of it beside it holds them",
        )
        return
    start = tail.offset
    try:
        while chunk := os.pread(fd, CHUNK_BYTES, tail.offset):
            tail.offset += len(chunk)
            yield Data(tail.path, chunk, tail.offset)
    finally:
        os.close(fd)
    info("follow_tail_copied", path=tail.path, copy=copy, start=start, end=tail.offset)


def switch_to_copy(tail: Tail, info: Info) -> bool:
    """Whether the path now names a copy of the file being read (put in its
    place: the old file has no name left): at least as long, the same first
    bytes and the same bytes before the offset. Then reading goes on in the
    copy at the same offset, so nothing is counted twice."""
    try:
        fd = os.open(tail.real, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return False
    st = os.fstat(fd)
    mark, head = tail.mark, tail.head
    if (
        stat.S_ISREG(st.st_mode)
        and head
        and st.st_size >= tail.offset
        and os.pread(fd, len(head), 0) == head
        and os.pread(fd, len(mark), tail.offset - len(mark)) == mark
    ):
        close_tail(tail)
        tail.fd, tail.file = fd, FileId.of(st)
        info("follow_replaced_by_a_copy", path=tail.path, offset=tail.offset)
        return True
    os.close(fd)
    return False


def skipped(
    tail: Tail, since_ns: int, skip: set[tuple[int, int]], info: Info
) -> Iterator[Piece]:
    """Files rotated away from a ``--follow`` path before they were opened
    (rotated twice between two looks), oldest first, each read whole."""
    for path in rotated_since(tail.real, since_ns, skip):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            file, end = FileId.of(os.fstat(fd)), 0
            info("follow_rotated_unseen", path=tail.path, file=path)
            yield Opened(tail.path, file, 0)
            while chunk := os.pread(fd, CHUNK_BYTES, end):
                end += len(chunk)
                yield Data(tail.path, chunk, end)
            yield Closed(tail.path, "rotated")
        finally:
            os.close(fd)


def drain(tail: Tail) -> Iterator[Data]:
    fd = tail.fd
    assert fd is not None
    while chunk := os.pread(fd, CHUNK_BYTES, tail.offset):
        if len(tail.head) < HEAD_BYTES:
            tail.head += chunk[: HEAD_BYTES - len(tail.head)]
        tail.offset += len(chunk)
        tail.mark = (tail.mark + chunk[-MARK_BYTES:])[-MARK_BYTES:]
        yield Data(tail.path, chunk, tail.offset)


def truncated(tail: Tail) -> bool:
    """Whether the open file no longer holds what we read before ``offset``.

    Shorter than the offset is the usual sign; the last bytes we read having
    changed also catches a file truncated and rewritten past the offset
    before we looked (a writer that truncates and appends at once).
    """
    fd = tail.fd
    assert fd is not None
    if os.fstat(fd).st_size < tail.offset:
        return True
    mark = tail.mark
    return bool(mark) and os.pread(fd, len(mark), tail.offset - len(mark)) != mark


def close_tail(tail: Tail) -> None:
    if tail.fd is not None:
        os.close(tail.fd)
        tail.fd = None
