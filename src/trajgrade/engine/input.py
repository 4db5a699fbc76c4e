"""Events built in code, checked before the engine grades them.

What :meth:`trajgrade.engine.engine.Engine.feed` and ``feed_all``, the entry
points for events a caller builds, do before feeding. msgspec does not
check field types when an event is constructed, so these check each one
(:func:`trajgrade.events.checked`, one or two microseconds) and lose a bad
one as an unreadable record is lost: its trace is tainted (its open graders
end in ``error``) and an ``invalid_event`` anomaly says what is wrong. The
per-event loop, ``feed_many``, takes events as they are: decoders check
every record they read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trajgrade.engine.state import Anomaly
from trajgrade.errors import InputError
from trajgrade.events import checked

if TYPE_CHECKING:
    from collections.abc import Iterable

    from trajgrade.events import Event

__all__ = ("checked_runs", "invalid_event")


def checked_runs(
    events: Iterable[Event],
) -> list[tuple[list[Event], InputError | None]]:
    """``events`` checked, as runs of good events each ended by the bad one
    after it (None for the last run; a run may be empty). Every event is
    checked before any is fed: an object that is not an event raises
    TypeError here (the caller could not tell which were fed, else)."""
    runs: list[tuple[list[Event], InputError | None]] = []
    good: list[Event] = []
    for event in events:
        try:
            good.append(checked(event))
        except InputError as exc:
            runs.append((good, exc))
            good = []
    runs.append((good, None))
    return runs


def invalid_event(exc: InputError) -> tuple[str, Anomaly]:
    """The trace a bad event belonged to, and the anomaly that says why it
    was not graded."""
    tid = exc.trace_id or ""  # (an id that is not a str: the default trace)
    message = f"{exc.message} (the event was not graded)"
    return tid, Anomaly(trace_id=tid, kind="invalid_event", message=message)
