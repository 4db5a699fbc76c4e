"""The live status line on a terminal (rich), kept out of the verdict stream.

Shown only when verdicts go to a terminal as text (``--output auto`` or
``pretty`` on a tty) and ``--quiet`` is off: a person is watching. JSONL
output, pipes and files never get it. Batch runs over files of known size
get a progress bar with an ETA; live runs get a status line: events/s, open
traces, traces passed and failed so far.

The display is refreshed by the runner's loop a few times a second (no
refresh thread touching the run's state). Verdict lines and terminal logs are
printed through the same console, above the status line, so the two never
tear each other.
"""

from __future__ import annotations

import sys
import time
from typing import IO, TYPE_CHECKING, Any, Final, Self

if TYPE_CHECKING:
    from rich.console import Console
    from rich.live import Live
    from rich.progress import Progress, TaskID

__all__ = ("REFRESH_SECONDS", "ConsoleWriter", "StatusLine")

#: How often the runner refreshes the display.
REFRESH_SECONDS: Final = 0.25


class ConsoleWriter:
    """A text stream that prints whole lines above the live display."""

    def __init__(self, console: Console) -> None:
        self._console = console
        self._buf = ""

    def write(self, text: str) -> int:
        self._buf += text
        return len(text)

    def flush(self) -> None:
        if "\n" not in self._buf:
            return
        from rich.text import Text

        done, _, self._buf = self._buf.rpartition("\n")
        # One print per flush: each print redraws the live display.
        self._console.print(Text.from_ansi(done), soft_wrap=True)

    def isatty(self) -> bool:
        return True


class StatusLine:
    """Progress (batch, known size) or a live status line."""

    def __init__(
        self,
        *,
        total_bytes: int | None,
        out: IO[str] | None = None,
        label: str | None = None,
    ) -> None:
        from rich.console import Console
        from rich.live import Live
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.console: Console = Console(file=out or sys.stdout)
        columns: list[Any] = [TextColumn("[bold]{task.description}")]
        if total_bytes:
            columns += [BarColumn(), DownloadColumn(), TimeRemainingColumn()]
        else:
            columns += [TimeElapsedColumn()]
        columns.append(TextColumn("{task.fields[stats]}"))
        self._progress: Progress = Progress(*columns, console=self.console)
        self._task: TaskID = self._progress.add_task(
            label or ("grading" if total_bytes else "following"),
            total=total_bytes or None,
            stats="",
        )
        self._live: Live = Live(
            self._progress,
            console=self.console,
            auto_refresh=False,
            transient=True,
            redirect_stdout=False,
            redirect_stderr=True,
        )
        self._last = (time.monotonic(), 0)
        self._rate = 0.0

    def __enter__(self) -> Self:
        self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.stop()

    def update(
        self,
        *,
        events: int,
        bytes_done: int,
        open_traces: int,
        passed: int,
        failed: int,
    ) -> None:
        """Show the run's counters now."""
        now = time.monotonic()
        t0, e0 = self._last
        if now - t0 >= 0.5:
            # A short moving window: the rate a person sees is the current one.
            self._rate = (events - e0) / (now - t0)
            self._last = (now, events)
        stats = (
            f"{self._rate:,.0f} events/s · {open_traces:,} open · "
            f"[green]{passed:,} passed[/] · [red]{failed:,} not passed[/]"
        )
        self._progress.update(self._task, completed=bytes_done, stats=stats)
        self._live.refresh()
