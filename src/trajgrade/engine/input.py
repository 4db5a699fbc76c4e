"""Events built in code, checked before the engine grades them.

A mixin of :class:`trajgrade.engine.engine.Engine`: ``feed`` and ``feed_all``, the
entry points for events a caller builds. msgspec does not check field types
when an event is constructed, so these check each one
(:func:`trajgrade.events.checked`, one or two microseconds) and lose a bad one
as an unreadable record is lost: its trace is tainted (its open graders end
in ``error``) and an ``invalid_event`` anomaly says what is wrong. The
per-event loop, ``feed_many``, takes events as they are: decoders check
every record they read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trajgrade.engine.clock import check_clock
from trajgrade.engine.state import Anomaly
from trajgrade.errors import InputError
from trajgrade.events import checked

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from trajgrade.events import Event
    from trajgrade.verdicts import Verdict

__all__ = ("CheckedInput",)


class CheckedInput:
    """``feed`` and ``feed_all`` for the engine."""

    anomalies: list[Anomaly]

    if TYPE_CHECKING:  # (declared only: the engine's)

        def feed_many(
            self,
            events: Sequence[Event],
            *,
            now: float | None = None,
            default_trace: str = "",
        ) -> list[Verdict]: ...
        def reject(self, trace_id: str, reason: str) -> None: ...

    def feed(self, event: Event, *, now: float | None = None) -> Sequence[Verdict]:
        """Process one event; return the verdicts it decided (often none).

        An event with a wrong field type is not graded: its trace is tainted
        and an ``invalid_event`` anomaly says why. An object that is not an
        event raises TypeError, a ``now`` that is not a finite number
        ValueError (the clock is the caller's, not the agent's data).
        """
        if now is not None:
            check_clock(now)
        try:
            event = checked(event)
        except InputError as exc:
            return self._invalid(exc)
        return self.feed_many((event,), now=now)

    def feed_all(self, events: Iterable[Event]) -> list[Verdict]:
        """Feed many events, each checked as :meth:`feed` does; return all
        their verdicts (batch convenience). An object that is not an event
        raises TypeError before any of them is fed (the caller cannot tell
        which were, else)."""
        read: list[Event | InputError] = []
        for event in events:
            try:
                read.append(checked(event))
            except InputError as exc:
                read.append(exc)
        out: list[Verdict] = []
        good: list[Event] = []
        for item in read:
            if isinstance(item, InputError):
                out += self.feed_many(good) + self._invalid(item)  # in order
                good = []
            else:
                good.append(item)
        return out + self.feed_many(good)

    def _invalid(self, exc: InputError) -> list[Verdict]:
        tid = exc.trace_id or ""  # (an id that is not a str: the default trace)
        message = f"{exc.message} (the event was not graded)"
        self.anomalies.append(
            Anomaly(trace_id=tid, kind="invalid_event", message=message)
        )
        self.reject(tid, exc.message)
        return []
