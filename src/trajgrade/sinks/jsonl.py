"""Verdicts as JSON lines (the machine channel) or as readable text (a terminal).

One msgspec Encoder is reused for every verdict; lines are written and flushed
as soon as the runner flushes, so a consumer sees a verdict the moment it is
decided.
"""

from __future__ import annotations

from typing import IO, TYPE_CHECKING, Final, Protocol

import msgspec

from trajgrade.sinks.summary import where
from trajgrade.verdicts import Outcome, Verdict

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ("JsonlSink", "PrettySink", "TextOut")


class TextOut(Protocol):
    """Where readable verdicts go: a text stream, or a live terminal display."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...


class JsonlSink:
    """One JSON object per verdict per line."""

    def __init__(self, out: IO[bytes]) -> None:
        self._out = out
        self._enc = msgspec.json.Encoder()
        self._buf = bytearray()

    def send(self, verdicts: Sequence[Verdict]) -> None:
        if verdicts:
            # One C call for the batch: a line per verdict, newline-terminated.
            self._buf += self._enc.encode_lines(verdicts)

    def flush(self) -> None:
        if self._buf:
            self._out.write(self._buf)
            self._buf.clear()
        self._out.flush()

    def close(self) -> None:
        self.flush()


_MARK: Final = {
    Outcome.PASS: ("PASS ", "32"),
    Outcome.FAIL: ("FAIL ", "31"),
    Outcome.ERROR: ("ERROR", "33"),
}


class PrettySink:
    """Readable lines for a terminal: outcome, trace, grader, score; then
    where it was decided (``file:line``) and the evidence."""

    def __init__(self, out: TextOut, *, color: bool = True) -> None:
        self._out = out
        self._color = color
        self._lines: list[str] = []

    def send(self, verdicts: Sequence[Verdict]) -> None:
        for v in verdicts:
            word, code = _MARK[v.outcome]
            if self._color:
                word = f"\x1b[1;{code}m{word}\x1b[0m"
            when = "" if v.final else " (sealed; final score follows)"
            early = " early" if v.early and v.final else ""
            # (The input and line first, as a compiler names them: a terminal
            # or an editor opens the deciding event from it.)
            place = where(v)
            said = f"{place}: {v.evidence}" if place else v.evidence
            self._lines.append(
                f"{word} {v.trace_id}  {v.grader}  score={v.score:.3g}{early}{when}\n      {said}\n"
            )

    def flush(self) -> None:
        if self._lines:
            self._out.write("".join(self._lines))
            self._lines.clear()
        self._out.flush()

    def close(self) -> None:
        self.flush()
