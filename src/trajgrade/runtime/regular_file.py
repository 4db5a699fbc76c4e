"""Reading a state file without trusting what is at its path.

A checkpoint's or session state's path may hold a FIFO (which blocks an
``open`` for ever), a device or a directory: :func:`read_regular` opens it
without blocking and reads only a regular file. (Moved out of
``_util.sealed``: the core's utilities do no I/O.)
"""

from __future__ import annotations

import os
import stat
from typing import Final

__all__ = ("NotRegularError", "read_regular")


class NotRegularError(OSError):
    """A state file's path holds a FIFO, a device, a directory or a socket:
    reading it could block for ever or never end, so it is refused at once."""


def read_regular(path: str) -> bytes:
    """The bytes of the regular file at ``path`` (``FileNotFoundError`` when
    there is none). Opened without blocking and checked before it is read:
    a FIFO put in place of a checkpoint would otherwise hang start-up."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
            msg = f"{kind} is in place of a state file"
            raise NotRegularError(msg)
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


_KINDS: Final = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFDIR: "a directory",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}
