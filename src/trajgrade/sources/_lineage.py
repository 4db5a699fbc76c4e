"""Where a followed file's content went: its copy, and the files rotated after it.

Rotation moves a log's content to siblings in its directory (``x.jsonl.1``,
``x.jsonl-20260101``): ``copytruncate`` copies the log and truncates it in
place, a rename rotation renames it and creates a new one. A follower that
lags, or was down, must find that content there. Files are recognised by
fingerprint, as Filebeat does: their first bytes, here with the bytes just
before the read offset, so a copy made at another moment of the same log
(the same first lines, other content at the offset) is not taken for it.
"""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Collection

__all__ = ("HEAD_BYTES", "MARK_BYTES", "find_copy", "rotated_since")

#: Leading bytes of a file that identify it (with its read position's mark).
HEAD_BYTES: Final = 4096
#: Bytes before the read offset compared to recognise the same content.
MARK_BYTES: Final = 64
#: Rotated files compressed by logrotate cannot be read back as a log.
_COMPRESSED: Final = (".gz", ".bz2", ".xz", ".zst", ".lz4", ".z", ".zip")


def find_copy(
    real: str, head: bytes, offset: int, mark: bytes, original: tuple[int, int]
) -> str | None:
    """A file beside ``real`` holding its content up to ``offset``: the same
    ``head`` at its start and ``mark`` just before ``offset``; the newest of
    several (the copy the last ``copytruncate`` made). The file itself
    (``original``: device, inode) is not its copy. None if there is none."""
    if not head:
        return None
    best: tuple[int, str] | None = None
    for path, st in _siblings(real, prefix=""):
        if st.st_size < offset or (st.st_dev, st.st_ino) == original:
            continue
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            same = os.pread(fd, len(head), 0) == head and (
                not mark or os.pread(fd, len(mark), offset - len(mark)) == mark
            )
        finally:
            os.close(fd)
        if same and (best is None or st.st_mtime_ns > best[0]):
            best = (st.st_mtime_ns, path)
    return None if best is None else best[1]


def rotated_since(
    real: str, since_ns: int, skip: Collection[tuple[int, int]]
) -> list[str]:
    """Siblings of ``real`` named after it (``x.jsonl.1``, ``x.jsonl-2026…``),
    last written after ``since_ns``, oldest write first: the files a rename
    rotation moved away before they could be followed. ``skip`` holds the
    (device, inode) of files already accounted for."""
    found = [
        (st.st_mtime_ns, path)
        for path, st in _siblings(real, prefix=os.path.basename(real))
        if st.st_mtime_ns > since_ns
        and (st.st_dev, st.st_ino) not in skip
        and not path.lower().endswith(_COMPRESSED)
    ]
    return [path for _, path in sorted(found)]


def _siblings(real: str, *, prefix: str) -> list[tuple[str, os.stat_result]]:
    """Regular files in ``real``'s directory other than ``real``, whose name
    starts with ``prefix``, one entry per file.

    The directory is listed twice and the lists merged: a listing made while
    a rotation renames files (``x.1`` → ``x.2``) may miss the file being
    renamed, and a file missed here is content lost."""
    directory = os.path.dirname(real) or "."
    name = os.path.basename(real)
    found: dict[tuple[int, int], tuple[str, os.stat_result]] = {}
    for _ in range(2):
        try:
            entries = list(os.scandir(directory))
        except OSError:
            return []
        for entry in entries:
            if entry.name == name or not entry.name.startswith(prefix):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue  # renamed meanwhile: the other listing has it
            if stat.S_ISREG(st.st_mode):
                found[st.st_dev, st.st_ino] = (entry.path, st)
    return list(found.values())
