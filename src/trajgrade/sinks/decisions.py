"""The decision stream: every guard decision as one JSON line.

A record is a :class:`~trajgrade.verdicts.GuardDecision` with
``"type": "decision"`` first, so decisions can share a stream with verdicts
(``grade --decisions -`` interleaves them on stdout, in the order they were
decided) and a reader tells them apart by ``type``. See docs/guard.md.
"""

from __future__ import annotations

import sys
from typing import IO, TYPE_CHECKING, Final

import msgspec

if TYPE_CHECKING:
    from collections.abc import Sequence

    from trajgrade.verdicts import GuardDecision

__all__ = ("DecisionWriter", "open_decisions")

_ENC: Final = msgspec.json.Encoder()


class DecisionWriter:
    """Writes decisions as JSON lines, flushed per batch."""

    def __init__(self, out: IO[bytes], *, owned: bool) -> None:
        self._out = out
        self._owned = owned
        self.written = 0

    def send(self, decisions: Sequence[GuardDecision]) -> None:
        if not decisions:
            return
        self._out.write(b"".join(_ENC.encode(d) + b"\n" for d in decisions))
        self._out.flush()
        self.written += len(decisions)

    def close(self) -> None:
        if self._owned:
            self._out.close()
        else:
            self._out.flush()


def open_decisions(path: str) -> DecisionWriter:
    """A writer for ``--decisions PATH`` (``-``: stdout, beside the verdicts).

    A file is appended to: a run resumed from a checkpoint, or several runs,
    add to one decision log. Raises OSError when it cannot be opened.
    """
    if path == "-":
        return DecisionWriter(sys.stdout.buffer, owned=False)
    return DecisionWriter(open(path, "ab"), owned=True)
