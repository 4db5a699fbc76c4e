"""The agent's output in ``trajgrade run``: read from its pipe, written on
from a thread of its own.

A reader of our stdout that stalls (a paused pager, a consumer that stopped
reading) must not stall the event loop with it: the SIGKILL that ends a
stop's grace, the wall-time clock and the end-of-run drain all run there.
So each chunk is written by a daemon thread while the loop waits for it,
cancellably. One chunk at a time: the agent still feels back-pressure (the
next chunk is read once this one is written). The thread uses ``os.write``
on the descriptor, not the buffered file: a daemon thread blocked inside a
buffered file's lock aborts the interpreter at exit.

Reading ends at end of output, or ``drain`` seconds after the agent exited
when a process it left behind still holds the pipe. Time spent waiting for
a slow reader of our stdout does not count against ``drain``: the agent's
last output is not cut off because the reader was slow. Once the run was
stopped or interrupted, though, a write blocked for ``drain`` seconds after
the agent exited is given up, so a stalled reader cannot keep trajgrade
(and nothing else) running.
"""

from __future__ import annotations

import asyncio
import math
import os
import queue
import threading
from typing import IO, TYPE_CHECKING, Any, Final

import anyio

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ("AgentOutput", "OutputAbandoned")

CHUNK: Final = 1 << 16


class OutputAbandoned(Exception):
    """A write to a stalled reader was given up (the run is ending)."""


class _Writer:
    """Writes chunks to a descriptor from a daemon thread."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._jobs: queue.SimpleQueue[tuple[bytes, Callable[[], None]]] = (
            queue.SimpleQueue()
        )
        self._thread: threading.Thread | None = None
        self.error: OSError | None = None

    async def write(self, chunk: bytes) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="trajgrade-agent-output", daemon=True
            )
            self._thread.start()
        done = anyio.Event()
        loop = asyncio.get_running_loop()  # anyio's backend here is asyncio

        def finished() -> None:
            try:
                loop.call_soon_threadsafe(done.set)
            except RuntimeError:
                pass  # the loop is gone: nobody waits any more

        self._jobs.put((chunk, finished))
        await done.wait()
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        while True:
            chunk, finished = self._jobs.get()
            view = memoryview(chunk)
            try:
                while view and self.error is None:
                    view = view[os.write(self._fd, view) :]
            except OSError as exc:
                self.error = exc
            finished()


class AgentOutput:
    """Reads the agent's stdout; passes what it read on to ``out``."""

    def __init__(self, stream: Any, out: IO[bytes], *, drain: float) -> None:
        self._stream = stream
        self._out = out
        self._drain = drain
        try:
            out.flush()
            fd: int | None = out.fileno()
        except (OSError, ValueError):  # io.UnsupportedOperation is both
            fd = None  # an in-memory file: it never blocks
        self._writer = None if fd is None else _Writer(fd)
        #: Monotonic (anyio) time after which reading stops; set once the
        #: agent exited, pushed back by the time spent in writes.
        self._read_until = math.inf
        self._receiving: anyio.CancelScope | None = None
        self._writing: anyio.CancelScope | None = None
        #: Writes may be given up: the run was stopped or interrupted.
        self._abandon = False
        self._agent_gone = False

    # ------------------------------------------------------------ events
    def agent_exited(self) -> None:
        """The agent is gone: read for ``drain`` seconds more at most."""
        self._agent_gone = True
        deadline = anyio.current_time() + self._drain
        self._read_until = deadline
        if self._receiving is not None:
            self._receiving.deadline = deadline
        self._limit_writes()

    def ending(self) -> None:
        """The run was stopped or interrupted: writes to a stalled reader
        may be given up once the agent is gone."""
        self._abandon = True
        self._limit_writes()

    def _limit_writes(self) -> None:
        if self._abandon and self._agent_gone and self._writing is not None:
            self._writing.deadline = min(
                self._writing.deadline, anyio.current_time() + self._drain
            )

    # ------------------------------------------------------------ I/O
    async def receive(self) -> bytes | None:
        """The next chunk of the agent's output; None at its end."""
        with anyio.CancelScope(deadline=self._read_until) as scope:
            self._receiving = scope
            try:
                return bytes(await self._stream.receive(CHUNK))
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                return None
            finally:
                self._receiving = None
        return None  # drained: a process left behind holds the pipe

    async def write(self, chunk: bytes) -> None:
        """Pass ``chunk`` on. Raises OSError when the reader is gone,
        :class:`OutputAbandoned` when a stalled write was given up."""
        if self._writer is None:
            self._out.write(chunk)
            self._out.flush()
            return
        started = anyio.current_time()
        # Shielded: the end of reading never cuts a write short; only
        # _limit_writes does, by this scope's own deadline.
        with anyio.CancelScope(shield=True) as scope:
            self._writing = scope
            self._limit_writes()
            try:
                await self._writer.write(chunk)
            finally:
                self._writing = None
        if scope.cancelled_caught:
            raise OutputAbandoned
        if self._agent_gone and not self._abandon:
            self._read_until += anyio.current_time() - started
