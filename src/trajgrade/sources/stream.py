"""Read a file or stdin in chunks, as soon as bytes are available.

A pipe or terminal is read as soon as it is readable (the event loop waits on
the descriptor), so it yields whatever its writer has written so far: a line
written into a live agent's log is graded without waiting for a full buffer.
Regular files are read in a worker thread.
"""

from __future__ import annotations

import os
import stat
import string
import sys
from pathlib import PurePath
from typing import TYPE_CHECKING, Final

from trajgrade.errors import Location, SourceError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator

__all__ = (
    "CHUNK_BYTES",
    "StreamSource",
    "open_source",
    "trace_name",
    "trace_template_problem",
    "unclosed_trace_name",
)

#: Bytes per read: large enough that per-read overhead vanishes, small enough
#: that a live pipe is not held back (a pipe read returns what is there).
CHUNK_BYTES: Final = 1 << 20


class StreamSource:
    """A file or stdin, read chunk by chunk."""

    def __init__(
        self, name: str, fd: int, *, owned: bool, default_trace: str | None = None
    ) -> None:
        self.name = name
        self._fd = fd
        self._owned = owned
        mode = os.fstat(fd).st_mode
        #: A regular file has a known size and is not live.
        self.regular = stat.S_ISREG(mode)
        # epoll works on pipes, sockets and terminals, not on files or
        # devices such as /dev/null: those are read in a worker thread.
        self._pollable = stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)
        self.size = os.fstat(fd).st_size if self.regular else None
        #: Default trace id for events that carry none.
        self.default_trace = default_trace if default_trace is not None else name

    @property
    def fd(self) -> int:
        """The descriptor being read (its position is the read position)."""
        return self._fd

    def blocks(self) -> Iterator[bytes]:
        """Yield chunks until end of input, without an event loop: for a
        regular file (a read never waits), as the synchronous batch run reads."""
        fd = self._fd
        while True:
            try:
                chunk = os.read(fd, CHUNK_BYTES)
            except OSError as exc:
                msg = f"cannot read: {exc.strerror or exc}"
                raise SourceError(msg, location=Location(file=self.name)) from None
            if not chunk:
                return
            yield chunk

    async def chunks(self) -> AsyncIterator[bytes]:
        """Yield chunks until end of input."""
        import anyio.lowlevel  # (here: a batch run never starts the loop)
        import anyio.to_thread

        fd = self._fd
        while True:
            try:
                if self.regular:
                    # A regular file read is a page-cache copy (well under a
                    # millisecond per chunk): done in the loop, it keeps the
                    # chunk on the core that decodes it. Other tasks run at
                    # the checkpoint after each chunk.
                    chunk = os.read(fd, CHUNK_BYTES)
                    await anyio.lowlevel.checkpoint()
                elif not self._pollable:
                    # Devices (/dev/null, …) cannot be polled and may block.
                    chunk = await anyio.to_thread.run_sync(os.read, fd, CHUNK_BYTES)
                else:
                    # Pipes and terminals: wait in the event loop, then read
                    # what is there. No thread is left blocked in read() when
                    # the run is cancelled (a signal), so the process can exit.
                    await anyio.wait_readable(fd)
                    chunk = os.read(fd, CHUNK_BYTES)
            except OSError as exc:
                msg = f"cannot read: {exc.strerror or exc}"
                raise SourceError(msg, location=Location(file=self.name)) from None
            if not chunk:
                return
            yield chunk

    def close(self) -> None:
        """Close the descriptor if this source opened it."""
        if self._owned:
            os.close(self._fd)


#: The fields of a ``--trace-id`` template.
TRACE_FIELDS: Final = ("path", "name", "stem", "parent")


def trace_template_problem(template: str) -> str | None:
    """What is wrong with a ``--trace-id`` template, or None: only the
    plain fields (``{path.upper}`` would format a method's repr), and some
    text or a field (``''`` names every trace the empty string)."""
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as exc:
        return f"{exc}"
    fields = [f for _, f, _, _ in parts if f is not None]
    bad = [f for f in fields if f not in TRACE_FIELDS]
    if bad:
        return f"unknown field {{{bad[0]}}}"
    if not template:
        return "it is empty"
    return None


def trace_name(template: str, source: str) -> str:
    """The default trace id of a source from a ``--trace-id`` template.

    Fields: ``{path}`` (as given), ``{name}`` (file name), ``{stem}`` (file
    name without its last extension), ``{parent}`` (the name of the
    directory it is in, also for a path relative to the working directory).
    For stdin every field is ``-``.
    """
    if source == "-":
        fields = dict.fromkeys(TRACE_FIELDS, "-")
    else:
        p = PurePath(source)
        fields = {
            "path": source,
            "name": p.name,
            "stem": p.stem,
            "parent": PurePath(os.path.abspath(source)).parent.name,
        }
    problem = trace_template_problem(template)
    if problem is None:
        try:
            name = template.format(**fields)
        except ValueError as exc:  # a format spec such as {path:d}
            name, problem = "", str(exc)
        if name:
            return name
        problem = problem or f"it gives {source} an empty trace id"
    msg = f"bad --trace-id template {template!r} ({problem}); use {{path}}, {{name}}, {{stem}} or {{parent}}"
    raise SourceError(msg)


def open_source(name: str, *, trace_template: str = "{path}") -> StreamSource:
    """``-`` is stdin; anything else is a file path."""
    trace = trace_name(trace_template, name)
    if name == "-":
        try:
            fd = sys.stdin.fileno()
            os.fstat(fd)
        except (AttributeError, ValueError, OSError):
            msg = "stdin is closed; pass input files, or pipe a log in"
            raise SourceError(msg, location=Location(file="-")) from None
        return StreamSource("-", fd, owned=False, default_trace=trace)
    try:
        fd = os.open(name, os.O_RDONLY)
    except OSError as exc:
        msg = f"cannot open input: {exc.strerror or exc}; check the path"
        raise SourceError(msg, location=Location(file=name)) from None
    if stat.S_ISDIR(os.fstat(fd).st_mode):
        os.close(fd)
        msg = "is a directory; pass the log files inside it (for example dir/*.jsonl)"
        raise SourceError(msg, location=Location(file=name))
    return StreamSource(name, fd, owned=True, default_trace=trace)


def unclosed_trace_name(name: str, is_closed: Callable[[str], bool]) -> str:
    """``name``, or ``name#2``, ``name#3``, … (the first that is not closed):
    the default trace of a file found anew at a path whose trace is over (a
    ``--watch`` file deleted and created again), whose events would be
    dropped as late under the old name. The same ``#n`` suffixes as a
    file's n-th unnamed trace (``formats._positions``)."""
    if not is_closed(name):
        return name
    n = 2
    while is_closed(f"{name}#{n}"):
        n += 1
    return f"{name}#{n}"
