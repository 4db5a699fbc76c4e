"""One owner per state directory: an ``flock`` on ``DIR/owner.lock`` holding
the owner's pid.

The kernel releases an ``flock`` when its holder dies, however it dies, so a
lock file left by a killed owner is not stale in the way a pid file is: the
next owner takes it at once and writes its own pid over the old one. The
pid is only there to name the owner in the refusal. Cold hook processes
(one per tool call) do not take this lock: they share a state directory
legitimately and serialise per session.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from typing import Final

__all__ = ("LOCK_NAME", "OwnerLock", "StateDirInUse")

LOCK_NAME: Final = "owner.lock"


class StateDirInUse(Exception):
    """Another live process owns the state directory."""

    def __init__(self, directory: str, pid: int | None, what: str) -> None:
        self.directory = directory
        self.pid = pid
        who = f"process {pid}" if pid is not None else "another process"
        super().__init__(
            f"{directory}: the state directory is in use by {who} (see "
            f"{os.path.join(directory, LOCK_NAME)}); two owners would overwrite "
            f"each other's state. Stop that process, or give this {what} its own "
            "state directory"
        )


class OwnerLock:
    """Hold ``directory``'s owner lock until :meth:`release` (or exit).

    Raises :class:`StateDirInUse` when a live process holds it, and
    ``OSError`` when the lock file cannot be created.
    """

    def __init__(self, directory: str, *, what: str) -> None:
        self.path = os.path.join(directory, LOCK_NAME)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _pid_in(fd)
            os.close(fd)
            raise StateDirInUse(directory, pid, what) from None
        except OSError:
            os.close(fd)
            raise
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            # A full disk keeps the pid out, not the lock: still the owner.
            pass
        self._fd: int | None = fd

    def release(self) -> None:
        """Let go (closing the file releases the ``flock``)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = None


def _pid_in(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
