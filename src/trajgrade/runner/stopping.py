"""What stops a run's reading (a signal, ``--fail-fast``), without an event
loop: the synchronous batch run imports neither anyio nor asyncio."""

from __future__ import annotations

from typing import Protocol

__all__ = ("StopFlag", "Stoppable")


class Stoppable(Protocol):
    """anyio's CancelScope in the async run, a :class:`StopFlag` in the
    synchronous batch run."""

    def cancel(self) -> None: ...

    @property
    def cancel_called(self) -> bool: ...


class StopFlag:
    """A stop request the synchronous batch run checks between chunks."""

    def __init__(self) -> None:
        self.cancel_called = False

    def cancel(self) -> None:
        self.cancel_called = True
