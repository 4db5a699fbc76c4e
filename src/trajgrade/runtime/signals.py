"""SIGINT/SIGTERM for the long-running runners: the first asks for a graceful
stop, the second exits at once.

The handlers are plain ``signal`` handlers, not the event loop's: they also
run while the loop is blocked (a write to a stalled stdout, say), so a second
signal always exits. The first is handed to the loop with
``call_soon_threadsafe``: anyio has no non-blocking "call in the loop" for a
signal handler (``from_thread.run_sync`` waits for the result, which would
deadlock on the loop's own thread), and ``anyio.open_signal_receiver`` uses
the loop's handlers, which cannot force the second-signal exit.
"""

from __future__ import annotations

import os
import signal
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = ("FORCED_EXIT", "graceful_signals", "plain_signals")

#: Exit status when a second signal forces an immediate exit.
FORCED_EXIT: Final = 130


@contextmanager
def graceful_signals(on_first: Callable[[int], None]) -> Iterator[None]:
    """While inside: the first SIGINT/SIGTERM calls ``on_first(signum)`` in
    the running event loop; a second one exits the process with 130."""
    import asyncio  # (here: the synchronous batch run starts no event loop)

    loop = asyncio.get_running_loop()  # anyio's backend is asyncio (aiokafka)

    def hand_to_loop(signum: int) -> None:
        loop.call_soon_threadsafe(on_first, signum)

    with plain_signals(hand_to_loop):
        yield


@contextmanager
def plain_signals(on_first: Callable[[int], None]) -> Iterator[None]:
    """While inside: the first SIGINT/SIGTERM calls ``on_first(signum)`` in
    the signal handler itself (keep it to setting flags); a second one exits
    the process with 130."""
    count = 0

    def handler(signum: int, frame: Any) -> None:
        nonlocal count
        count += 1
        if count > 1:
            os._exit(FORCED_EXIT)
        on_first(signum)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)
