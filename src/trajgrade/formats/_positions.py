"""Positional trace names: the n-th unnamed trace of a source.

Formats whose records are whole traces without an id of their own
(openai-chat conversations, letta and agentv records, vally trajectories,
OpenResponses traces) name them by position: the first takes the source's
default trace name, the n-th ``default#n``. A record that cannot be read
still takes its position, so the traces after it keep their names.
"""

from __future__ import annotations

__all__ = ("Positions",)


class Positions:
    """The positional names of one source's unnamed traces, in order."""

    __slots__ = ("_count", "_default")

    def __init__(self, default: str) -> None:
        self._default = default
        self._count = 0

    def next(self) -> str:
        """The next trace's name (its position is taken)."""
        self._count += 1
        return self._default if self._count == 1 else f"{self._default}#{self._count}"
