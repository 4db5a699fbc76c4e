"""What ``--follow`` and ``--watch`` are given, checked before anything is read.

A ``--follow`` path that is a directory, a device or unreadable, and a
``--watch`` directory that does not exist or cannot be listed, are errors
naming the path and the fix (:class:`~trajgrade.errors.SourceError`); a
``--follow`` path that does not exist yet is waited for.
"""

from __future__ import annotations

import os
import stat
from typing import Final

from trajgrade.errors import Location, SourceError
from trajgrade.sources._glob import Glob

__all__ = ("WatchRoot", "check_follow", "watch_root")

_GONE: Final = (FileNotFoundError, NotADirectoryError)


class WatchRoot:
    """A ``--watch`` directory and its pattern."""

    __slots__ = ("glob", "path", "real")

    def __init__(self, path: str, real: str, glob: Glob) -> None:
        self.path = path
        self.real = real
        self.glob = glob


def check_follow(path: str) -> str:
    """The absolute path to read ``path`` at; an error if it cannot be followed."""
    real = os.path.abspath(os.path.expanduser(path))
    where = Location(file=path)
    try:
        st = os.stat(real)
    except _GONE:
        return real  # waited for
    except OSError as exc:
        msg = (
            f"cannot follow: {exc.strerror or exc}; check the path and its permissions"
        )
        raise SourceError(msg, location=where) from None
    if stat.S_ISDIR(st.st_mode):
        msg = (
            "is a directory; follow files inside it, or use --watch DIR --glob PATTERN"
        )
        raise SourceError(msg, location=where)
    if not stat.S_ISREG(st.st_mode):
        msg = "is not a regular file; --follow reads growing log files (pipe a stream to stdin instead)"
        raise SourceError(msg, location=where)
    try:
        os.close(os.open(real, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK))
    except OSError as exc:
        msg = f"cannot read: {exc.strerror or exc}; check its permissions"
        raise SourceError(msg, location=where) from None
    return real


def watch_root(path: str, pattern: str) -> WatchRoot:
    real = os.path.abspath(os.path.expanduser(path))
    where = Location(file=path)
    if not os.path.exists(real):
        msg = "watched directory does not exist; create it or fix the --watch path"
        raise SourceError(msg, location=where)
    if not os.path.isdir(real):
        msg = "is not a directory; --watch takes a directory (use --follow for a file)"
        raise SourceError(msg, location=where)
    if not os.access(real, os.R_OK | os.X_OK):
        msg = "cannot list the watched directory; check its permissions"
        raise SourceError(msg, location=where)
    return WatchRoot(path, real, Glob(pattern))
