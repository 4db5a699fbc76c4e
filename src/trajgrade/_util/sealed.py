"""Checksummed envelopes for state trajgrade writes and reads back later.

A checkpoint, a hook session file or a Kafka changelog value is msgpack,
and msgpack has no integrity check: a flipped bit in an integer (a byte
offset, an inode, a counter) still decodes, and a resumed run would then
give other verdicts than the run that wrote it. So every such payload is
sealed: a magic tag, a length and a blake2b digest over the tag, length and
payload. :func:`unseal` refuses anything that does not match, so damage is
an error with a reason, never state that silently differs.

Layout (little-endian)::

    magic   4 bytes   b"TGS" + the envelope version (b"\\x01")
    length  8 bytes   payload length
    digest 16 bytes   blake2b(magic + length + payload, digest_size=16)
    payload
"""

from __future__ import annotations

import os
import stat
import struct
from typing import Final

from trajgrade._util.digest import blake2b

__all__ = (
    "MAGIC",
    "DamagedError",
    "NotRegularError",
    "is_sealed",
    "read_regular",
    "seal",
    "unseal",
)

MAGIC: Final = b"TGS\x01"
_LENGTH: Final = struct.Struct("<Q")
_DIGEST_SIZE: Final = 16
_HEADER: Final = len(MAGIC) + _LENGTH.size + _DIGEST_SIZE


class DamagedError(ValueError):
    """Sealed bytes that do not check out; the message says how."""


def _digest(length: bytes, payload: bytes | memoryview) -> bytes:
    h = blake2b(digest_size=_DIGEST_SIZE)
    h.update(MAGIC)
    h.update(length)
    h.update(payload)
    return h.digest()


def seal(payload: bytes) -> bytes:
    """``payload`` with its envelope."""
    length = _LENGTH.pack(len(payload))
    return MAGIC + length + _digest(length, payload) + payload


def is_sealed(data: bytes | bytearray | memoryview) -> bool:
    """Whether ``data`` starts like an envelope (it may still be damaged)."""
    return bytes(data[: len(MAGIC)]) == MAGIC


def unseal(data: bytes | bytearray | memoryview) -> memoryview:
    """The payload of sealed ``data``; :class:`DamagedError` when it was
    cut short, extended, altered, or never sealed."""
    view = memoryview(data)
    if not is_sealed(view):
        msg = "no checksummed envelope (not written by this trajgrade version, or damaged at its start)"
        raise DamagedError(msg)
    if len(view) < _HEADER:
        msg = f"cut short: {len(view)} bytes, less than the {_HEADER}-byte header"
        raise DamagedError(msg)
    length = bytes(view[len(MAGIC) : len(MAGIC) + _LENGTH.size])
    (expected,) = _LENGTH.unpack(length)
    payload = view[_HEADER:]
    if len(payload) != expected:
        how = "cut short" if len(payload) < expected else "longer than written"
        msg = f"{how}: {len(payload)} payload bytes, the header says {expected}"
        raise DamagedError(msg)
    if _digest(length, payload) != bytes(view[_HEADER - _DIGEST_SIZE : _HEADER]):
        msg = "checksum mismatch: the bytes changed after they were written"
        raise DamagedError(msg)
    return payload


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
