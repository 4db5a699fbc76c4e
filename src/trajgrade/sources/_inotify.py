"""Linux ``inotify`` through ``ctypes``: one descriptor, no thread, no polling.

Each watched directory gets one watch that reports events for the directory
itself and for every entry in it (writes, truncation, creation, renames,
deletion), so following a file costs one watch on its directory, and a
rotation (rename + create) is seen as the two names changing. The descriptor
is non-blocking and the event loop waits on it (``anyio.wait_readable``): an
idle follower makes no system calls at all. A queue overflow is reported as
"events lost" so the caller re-checks everything.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import struct
from typing import Final

import anyio

__all__ = ("Inotify",)

_IN_MODIFY: Final = 0x002
_IN_ATTRIB: Final = 0x004
_IN_CLOSE_WRITE: Final = 0x008
_IN_MOVED_FROM: Final = 0x040
_IN_MOVED_TO: Final = 0x080
_IN_CREATE: Final = 0x100
_IN_DELETE: Final = 0x200
_IN_DELETE_SELF: Final = 0x400
_IN_MOVE_SELF: Final = 0x800
_IN_Q_OVERFLOW: Final = 0x4000
_IN_IGNORED: Final = 0x8000
_IN_ONLYDIR: Final = 0x01000000
_IN_NONBLOCK: Final = os.O_NONBLOCK
_IN_CLOEXEC: Final = os.O_CLOEXEC
_MASK: Final = (
    _IN_MODIFY
    | _IN_ATTRIB
    | _IN_CLOSE_WRITE
    | _IN_MOVED_FROM
    | _IN_MOVED_TO
    | _IN_CREATE
    | _IN_DELETE
    | _IN_DELETE_SELF
    | _IN_MOVE_SELF
    | _IN_ONLYDIR
)
_HEADER: Final = struct.Struct("iIII")  # wd, mask, cookie, len
_READ_BYTES: Final = 1 << 16


def _libc() -> ctypes.CDLL:
    lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    lib.inotify_init1.argtypes = [ctypes.c_int]
    lib.inotify_init1.restype = ctypes.c_int
    lib.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    lib.inotify_add_watch.restype = ctypes.c_int
    lib.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
    lib.inotify_rm_watch.restype = ctypes.c_int
    return lib


class Inotify:
    """An ``inotify`` instance watching directories (see the module docstring)."""

    name = "inotify"

    def __init__(self) -> None:
        self._lib = _libc()
        fd = self._lib.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        self._fd: int | None = fd
        self._paths: dict[int, str] = {}
        self._wds: dict[str, int] = {}

    def add_dir(self, path: str) -> bool:
        if self._fd is None:
            return False
        if path in self._wds:
            return True
        wd = self._lib.inotify_add_watch(self._fd, os.fsencode(path), _MASK)
        if wd < 0:
            # ENOSPC: the user's watch limit; ENOENT/ENOTDIR: gone already.
            # Either way the periodic re-check still covers this directory.
            return False
        self._paths[wd] = path
        self._wds[path] = wd
        return True

    def discard_dir(self, path: str) -> None:
        wd = self._wds.pop(path, None)
        if wd is not None and self._fd is not None:
            self._paths.pop(wd, None)
            self._lib.inotify_rm_watch(self._fd, wd)

    async def wait(self, quiet: float) -> set[str] | None:
        fd = self._fd
        if fd is None:
            await anyio.sleep(quiet)
            return None
        with anyio.move_on_after(quiet):
            while True:
                changed = self._drain(fd)
                if changed is None or changed:
                    return changed
                await anyio.wait_readable(fd)
        return None

    def _drain(self, fd: int) -> set[str] | None:
        """Read every queued event; the paths they name, or None if some were lost."""
        changed: set[str] = set()
        lost = False
        while True:
            try:
                buf = os.read(fd, _READ_BYTES)
            except BlockingIOError:
                break
            except OSError as exc:  # pragma: no cover - EINTR is retried by Python
                if exc.errno == errno.EINTR:
                    continue
                raise
            pos = 0
            while pos + _HEADER.size <= len(buf):
                wd, mask, _cookie, length = _HEADER.unpack_from(buf, pos)
                pos += _HEADER.size
                raw = buf[pos : pos + length].rstrip(b"\0")
                pos += length
                if mask & _IN_Q_OVERFLOW:
                    lost = True
                    continue
                base = self._paths.get(wd)
                if base is None:
                    continue
                if mask & _IN_IGNORED:
                    # The directory is gone (or was unwatched): forget it.
                    self._paths.pop(wd, None)
                    self._wds.pop(base, None)
                changed.add(os.path.join(base, os.fsdecode(raw)) if raw else base)
        return None if lost else changed

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            self._paths.clear()
            self._wds.clear()
