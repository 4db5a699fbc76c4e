"""Sinks: where verdicts go. A sink takes verdicts and flushes them; a runner
flushes before it reports progress (and, with durable state, before it
commits positions)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence

    from trajgrade.verdicts import Verdict

__all__ = ("Sink",)


class Sink(Protocol):
    """Receives verdicts in decision order."""

    def send(self, verdicts: Sequence[Verdict]) -> None:
        """Queue verdicts for writing."""
        ...

    def flush(self) -> None:
        """Write everything queued; return once it is written."""
        ...

    def close(self) -> None:
        """Flush and release the destination."""
        ...
