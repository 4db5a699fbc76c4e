"""An append-only journal of checksummed records, made durable before use.

A record is ``length (u32, big-endian) | crc32 of the payload (u32) |
payload``. A journal is a sequence of segment files ``<name>.<n>`` in one
directory: :meth:`Journal.rotate` starts a new segment, so a checkpoint can
save what the old segments hold and then :meth:`Journal.drop` them, while
new records go on being appended.

Durability: :meth:`Journal.append` returns once the record is written to the
file (it survives a killed process) and, with ``fsync=True``, once it is on
the device too (it survives a power cut). Concurrent appends share one
``fdatasync`` (group commit): a writer whose record an fsync already covered
does not wait for another one.

Recovery (:func:`recover`) reads every segment in order and keeps the
undamaged prefix of each: a record cut short, a length past
:data:`MAX_RECORD`, or a checksum that does not match ends that segment's
readable part, and the damage is reported with its file and offset. A
record cut short is what a process killed in the middle of a write leaves;
that record was never acknowledged, since acknowledging comes after the
write.
"""

from __future__ import annotations

import os
import re
import struct
import threading
import zlib
from typing import Final

import msgspec

__all__ = (
    "MAX_RECORD",
    "Damage",
    "Journal",
    "JournalClosed",
    "Journals",
    "Recovery",
    "encode_record",
    "recover",
)

#: Largest payload a record may carry (a length past it is damage).
MAX_RECORD: Final = 64 * 1024 * 1024
_HEADER: Final = struct.Struct(">II")


class JournalClosed(OSError):
    """An append after :meth:`Journal.close` (the owner is shutting down)."""


class Damage(msgspec.Struct, frozen=True):
    """Where a segment stops being readable, and why."""

    path: str
    offset: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: damaged record at byte {self.offset} ({self.reason}); the records before it are used"


class Recovery(msgspec.Struct, frozen=True):
    """What :func:`recover` read: every intact record, in order."""

    records: list[bytes]
    damage: list[Damage]
    #: The segment files read, oldest first.
    segments: list[str]


def encode_record(payload: bytes) -> bytes:
    """One record's bytes: header (length, crc32) then the payload."""
    if len(payload) > MAX_RECORD:
        msg = f"a journal record of {len(payload)} bytes is over the {MAX_RECORD}-byte limit"
        raise ValueError(msg)
    return _HEADER.pack(len(payload), zlib.crc32(payload)) + payload


def _segments(directory: str, name: str) -> list[tuple[int, str]]:
    pattern = re.compile(re.escape(name) + r"\.(\d{1,12})")
    found = []
    try:
        entries = os.listdir(directory)
    except FileNotFoundError:
        return []
    for entry in entries:
        m = pattern.fullmatch(entry)
        if m is not None:
            found.append((int(m.group(1)), os.path.join(directory, entry)))
    return sorted(found)


def _read_segment(path: str) -> tuple[list[bytes], Damage | None]:
    with open(path, "rb") as f:
        data = f.read()
    records: list[bytes] = []
    at = 0
    while at < len(data):
        if len(data) - at < _HEADER.size:
            return records, Damage(path, at, "record header cut short")
        length, crc = _HEADER.unpack_from(data, at)
        if length > MAX_RECORD:
            return records, Damage(path, at, f"length {length} past the limit")
        start = at + _HEADER.size
        payload = data[start : start + length]
        if len(payload) < length:
            return records, Damage(path, at, "record cut short")
        if zlib.crc32(payload) != crc:
            return records, Damage(path, at, "checksum mismatch")
        records.append(payload)
        at = start + length
    return records, None


def recover(directory: str, name: str) -> Recovery:
    """Every intact record of the journal ``name`` in ``directory``.

    Raises ``OSError`` for a segment that cannot be read at all.
    """
    records: list[bytes] = []
    damage: list[Damage] = []
    paths = [path for _, path in _segments(directory, name)]
    for path in paths:
        got, broken = _read_segment(path)
        records += got
        if broken is not None:
            damage.append(broken)
    return Recovery(records=records, damage=damage, segments=paths)


class Journal:
    """The segment being appended to, plus the older ones not yet dropped."""

    def __init__(self, directory: str, name: str, *, fsync: bool = True) -> None:
        self.directory = directory
        self.name = name
        self.fsync = fsync
        existing = _segments(directory, name)
        self._number = existing[-1][0] if existing else 0
        self._lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._written = 0  # records written to the current segment
        self._synced = 0  # of which an fsync covered these
        self._fd: int | None = None
        self._closed = False
        self._open_next()

    @property
    def path(self) -> str:
        """The segment being appended to."""
        return self._path(self._number)

    def _path(self, number: int) -> str:
        return os.path.join(self.directory, f"{self.name}.{number:08d}")

    def _open_next(self) -> None:
        self._number += 1
        # Owner-only: records may hold what the state holds (bound secrets).
        self._fd = os.open(
            self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o600
        )
        self._written = self._synced = self._size = 0
        self._broken = False

    def append(self, payload: bytes) -> None:
        """Write one record; return once it is durable (see the module doc).

        Raises ``OSError`` when it cannot be written (a full disk, an I/O
        error): then the record may be partly written, and recovery stops
        at it. :class:`JournalClosed` once the journal is closed.
        """
        data = encode_record(payload)
        with self._lock:
            if self._closed or self._fd is None:
                msg = "the journal is closed (shutting down)"
                raise JournalClosed(msg)
            if self._broken:
                broken = self._fd_or_raise()
                self._fd = None
                os.close(broken)
                self._open_next()
            fd = self._fd_or_raise()
            try:
                view = memoryview(data)
                while view:  # a short write's rest raises the real error
                    view = view[os.write(fd, view) :]
            except OSError:
                self._undo(fd)
                raise
            self._size += len(data)
            self._written += 1
            mine = self._written
        if self.fsync:
            self._sync(fd, mine)

    def _fd_or_raise(self) -> int:
        if self._fd is None:
            msg = "the journal is closed (shutting down)"
            raise JournalClosed(msg)
        return self._fd

    def _undo(self, fd: int) -> None:
        # A part-written record would end the segment's readable part and
        # hide every record appended after it: cut it off, or, if even that
        # fails, go on in a new segment.
        try:
            os.ftruncate(fd, self._size)
        except OSError:
            self._broken = True

    def _sync(self, fd: int, mine: int) -> None:
        with self._sync_lock:
            with self._lock:
                if self._fd != fd or self._synced >= mine:
                    # Rotated meanwhile (rotate syncs the old segment) or
                    # covered by another writer's fsync.
                    return
                upto = self._written
            os.fdatasync(fd)
            with self._lock:
                if self._fd == fd:
                    self._synced = max(self._synced, upto)

    def rotate(self) -> list[str]:
        """Start a new segment; the paths of the older ones, for
        :meth:`drop` once what they hold is saved elsewhere."""
        with self._sync_lock, self._lock:
            current = self._number
            if self._closed:  # nothing more comes: every segment is old
                return [path for _, path in _segments(self.directory, self.name)]
            if self._fd is None or self._size == 0:
                # Nothing new since the last rotation: no empty segment.
                return [
                    path
                    for number, path in _segments(self.directory, self.name)
                    if number < current
                ]
            old = self._fd
            if self.fsync:
                os.fdatasync(old)
            os.close(old)
            self._fd = None
            self._open_next()
        return [
            path
            for number, path in _segments(self.directory, self.name)
            if number <= current
        ]

    def drop(self, paths: list[str]) -> None:
        """Remove segments whose records are saved elsewhere."""
        for path in paths:
            if path == self.path and not self._closed:
                continue
            try:
                os.unlink(path)
            except FileNotFoundError:
                continue

    def close(self) -> None:
        """Refuse every later append and close the segment."""
        with self._sync_lock, self._lock:
            self._closed = True
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


class Journals:
    """The journals a checkpoint covers: :meth:`rotate` as it takes its cut
    (with no await before the cut: every record of the rotated segments is
    in it), :meth:`drop` once it is written."""

    def __init__(self) -> None:
        self.members: list[Journal] = []

    def append(self, journal: Journal) -> None:
        self.members.append(journal)

    def rotate(self) -> list[tuple[Journal, list[str]]]:
        return [(j, j.rotate()) for j in self.members]

    def drop(self, rotated: list[tuple[Journal, list[str]]]) -> None:
        for journal, old in rotated:
            journal.drop(old)
