"""An input being decoded, and how to bring a new one back to a checkpoint.

A :class:`TrackedInput` wraps a :class:`~trajgrade.pipeline.decoder.SourceDecoder`
with what a checkpoint needs to find the same place again: the file's
identity (device and inode, plus a digest of its first bytes, since inode
numbers are reused after a delete) and the decoder's offset.

Resuming a decoder at an offset needs the format reader's state at that
offset (a Claude Code reader remembers which responses' usage it counted,
say). Rather than make every reader serialisable, a resume *replays* the
bytes before the offset through a fresh decoder and drops the events (they
are already in the engine state of the checkpoint): the reader is then in
exactly the state it had. Formats whose records decode alone (trajgrade's
canonical JSONL) skip the replay and start at the offset.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Final

from trajgrade.pipeline.decoder import SourceDecoder
from trajgrade.runner.store import HEAD_BYTES, Position, head_digest

if TYPE_CHECKING:
    from trajgrade.pipeline.batches import Batch

__all__ = ("TrackedInput", "identity_matches")

_REPLAY_CHUNK: Final = 1 << 20


class TrackedInput:
    """One input's decoder plus its identity and resume position."""

    __slots__ = ("decoder", "dev", "done", "head", "ino", "source")

    def __init__(
        self,
        source: str,
        decoder: SourceDecoder,
        *,
        dev: int | None = None,
        ino: int | None = None,
    ) -> None:
        #: The input's name in positions (an absolute path; ``-`` for stdin).
        self.source = source
        self.decoder = decoder
        self.dev = dev
        self.ino = ino
        #: The first bytes of the file, for its identity digest.
        self.head = bytearray()
        self.done = False

    def feed(self, data: bytes) -> Batch:
        """Decode the next bytes of the input."""
        if len(self.head) < HEAD_BYTES:
            self.head += data[: HEAD_BYTES - len(self.head)]
        return self.decoder.feed(data)

    def close(self) -> Batch:
        """End of this input: flush the decoder; nothing is left to resume."""
        self.done = True
        return self.decoder.close()

    def stop(self) -> Batch:
        """Reading stopped early: flush the decoder, dropping an unread part."""
        self.done = True
        return self.decoder.stop()

    def position(self) -> Position | None:
        """Where a restart should continue (None: not a file, cannot resume)."""
        if self.dev is None or self.ino is None:
            return None
        d = self.decoder
        return Position(
            source=self.source,
            dev=self.dev,
            ino=self.ino,
            offset=d.offset,
            line=d.line,
            format=d.format,
            head=head_digest(bytes(self.head)),
            head_len=len(self.head),
            done=self.done,
            trace=d.default_trace,
        )

    def resume(self, fd: int, pos: Position) -> None:
        """Bring this fresh input to ``pos`` by reading ``fd`` (the same file,
        see :func:`identity_matches`); ``fd`` is left at ``pos.offset``."""
        d = self.decoder
        # The head grows from the bytes fed next, which start at the offset:
        # it must hold the bytes before it, not the checkpoint's head (that
        # may reach past the offset into a part line read again now).
        self.head[:] = os.pread(fd, min(HEAD_BYTES, pos.offset), 0)
        if SourceDecoder.can_resume_at(pos.format) and pos.format is not None:
            d.resume_at(pos.offset, pos.line, pos.format)
        else:
            at = 0
            while at < pos.offset:
                chunk = os.pread(fd, min(_REPLAY_CHUNK, pos.offset - at), at)
                if not chunk:
                    break
                at += len(chunk)
                d.feed(chunk)  # events and errors were handled before the checkpoint
        os.lseek(fd, pos.offset, os.SEEK_SET)


def identity_matches(fd: int, pos: Position) -> bool:
    """Whether ``fd`` is the file ``pos`` was taken from, at least as long."""
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != (pos.dev, pos.ino) or st.st_size < pos.offset:
        return False
    head = os.pread(fd, pos.head_len, 0)
    return len(head) == pos.head_len and head_digest(head) == pos.head
