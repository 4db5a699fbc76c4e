"""``--report run.html``: a sink of verdicts, decisions and events that
rewrites one HTML file atomically (temp file, then rename) at intervals
and when the run ends, so a live ``--follow`` run can be watched."""

from __future__ import annotations

import os
import tempfile
import time
from typing import TYPE_CHECKING, Any

from trajgrade.report.collector import RunReport
from trajgrade.report.page import render

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from trajgrade.events import Event
    from trajgrade.verdicts import GuardDecision, Verdict

__all__ = ("ReportSink",)


class ReportSink:
    """A :class:`trajgrade.sinks.Sink` that also takes decisions and events.

    ``interval`` seconds between rewrites on flush (the clock is read here,
    at the edge, never by the core); ``live`` adds a refresh to the page."""

    def __init__(
        self, path: str, *, interval: float = 2.0, live: bool = False, log: Any = None
    ) -> None:
        self.path = path
        self.interval = interval
        self.live = live
        self.log = log
        self.report = RunReport()
        self._written_at: float | None = None

    def observe_events(self, source: str, events: Iterable[Event]) -> None:
        # (A session in two inputs is named on the page; the runner logs it.)
        self.report.observe(source, events)

    def send(self, verdicts: Sequence[Verdict]) -> None:
        self.report.send(verdicts)

    def send_decisions(self, decisions: Sequence[GuardDecision]) -> None:
        self.report.send_decisions(decisions)

    def flush(self) -> None:
        now = time.monotonic()
        if self._written_at is None or now - self._written_at >= self.interval:
            self.write(live=self.live)
            self._written_at = now

    def close(self) -> None:
        self.write(live=False)

    def write(self, *, live: bool) -> None:
        """Write the page now: a reader sees the old page or the new one."""
        page = render(self.report.snapshot(), title="trajgrade run report", live=live)
        folder = os.path.dirname(os.path.abspath(self.path))
        fd, tmp = tempfile.mkstemp(prefix=".report-", suffix=".html", dir=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(page)
            os.chmod(tmp, 0o644)  # (mkstemp's 0600 would hide it from a browser user)
            os.replace(tmp, self.path)
        except BaseException:
            os.unlink(tmp)
            raise
