"""Linux ``inotify`` (through ``inotify_simple``): one descriptor, no thread,
no polling.

Each watched directory gets one watch that reports events for the directory
itself and for every entry in it (writes, truncation, creation, renames,
deletion), so following a file costs one watch on its directory, and a
rotation (rename + create) is seen as the two names changing. The descriptor
is non-blocking and the event loop waits on it (``anyio.wait_readable``): an
idle follower makes no system calls at all. A queue overflow is reported as
"events lost" so the caller re-checks everything.
"""

from __future__ import annotations

import os
from typing import Final

import anyio
from inotify_simple import INotify, flags

__all__ = ("Inotify",)

_MASK: Final = (
    flags.MODIFY
    | flags.ATTRIB
    | flags.CLOSE_WRITE
    | flags.MOVED_FROM
    | flags.MOVED_TO
    | flags.CREATE
    | flags.DELETE
    | flags.DELETE_SELF
    | flags.MOVE_SELF
    | flags.ONLYDIR
)


class Inotify:
    """An ``inotify`` instance watching directories (see the module docstring)."""

    name = "inotify"

    def __init__(self) -> None:
        self._ino: INotify | None = INotify(nonblocking=True)
        self._paths: dict[int, str] = {}
        self._wds: dict[str, int] = {}

    def add_dir(self, path: str) -> bool:
        if self._ino is None:
            return False
        if path in self._wds:
            return True
        try:
            wd = self._ino.add_watch(path, _MASK)
        except OSError:
            # ENOSPC: the user's watch limit; ENOENT/ENOTDIR: gone already.
            # Either way the periodic re-check still covers this directory.
            return False
        self._paths[wd] = path
        self._wds[path] = wd
        return True

    def discard_dir(self, path: str) -> None:
        wd = self._wds.pop(path, None)
        if wd is not None and self._ino is not None:
            self._paths.pop(wd, None)
            try:
                self._ino.rm_watch(wd)
            except OSError:
                pass  # the kernel dropped it already (the directory is gone)

    async def wait(self, quiet: float) -> set[str] | None:
        ino = self._ino
        if ino is None:
            await anyio.sleep(quiet)
            return None
        with anyio.move_on_after(quiet):
            while True:
                changed = self._drain(ino)
                if changed is None or changed:
                    return changed
                await anyio.wait_readable(ino.fileno())
        return None

    def _drain(self, ino: INotify) -> set[str] | None:
        """Read every queued event; the paths they name, or None if some were lost."""
        changed: set[str] = set()
        lost = False
        for wd, mask, _cookie, name in ino.read(timeout=0):
            if mask & flags.Q_OVERFLOW:
                lost = True
                continue
            base = self._paths.get(wd)
            if base is None:
                continue
            if mask & flags.IGNORED:
                # The directory is gone (or was unwatched): forget it.
                self._paths.pop(wd, None)
                self._wds.pop(base, None)
            changed.add(os.path.join(base, name) if name else base)
        return None if lost else changed

    def close(self) -> None:
        if self._ino is not None:
            self._ino.close()
            self._ino = None
            self._paths.clear()
            self._wds.clear()
