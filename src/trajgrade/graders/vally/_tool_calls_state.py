"""The per-trace state of a ``tool-calls`` grader (``tool_calls.py``) and its
table of open calls.

Kept apart from the grader so that its module stays readable; the grader
re-exports :class:`ToolCallsState`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from trajgrade.events import OPEN_CALLS_MAX

if TYPE_CHECKING:
    from trajgrade.events import ToolCall

__all__ = ("Pending", "ToolCallsState", "remember")


class Pending(msgspec.Struct, array_like=True, gc=False):
    """A call waiting for its result."""

    seq: int
    #: Required entries whose call-side filters (name, args, step) matched.
    req: int = 0
    #: Disallowed entries with a ``result`` filter whose call side matched.
    dis: int = 0


class ToolCallsState(msgspec.Struct, array_like=True, gc=False):
    """Per-trace state: counters, a cursor and the open calls, nothing else."""

    counts: list[int]
    turns: int = 0
    calls: int = 0
    cursor: int = 0
    #: Required entries not yet satisfied by count.
    unmet: int = 0
    #: Required ``final`` entries satisfied by the latest call (once completed).
    last_ok: int = 0
    #: Open calls, oldest first; None for a call no entry is waiting on (kept
    #: only so that a result without call_id pairs with the right call).
    #: None until the first call is remembered: most open traces of a suite
    #: that never reads results need no dict (per-trace memory).
    pending: dict[str, Pending | None] | None = None


def remember(
    state: ToolCallsState, call: ToolCall, seq: int, req: int, dis: int
) -> None:
    """Open call number ``seq``, waited on by the ``req`` and ``dis`` entry bits."""
    # Every call is kept (not only candidates) so that results without a
    # call_id pair with the oldest open call, whatever its name.
    key = call.call_id or f"#{seq}"
    pending = state.pending
    if pending is None:
        pending = state.pending = {}
    elif key in pending:
        # A reused id: the later call takes it, and its place in the
        # oldest-first order is its own, not the earlier one's.
        del pending[key]
    pending[key] = Pending(seq, req, dis) if req or dis else None
    if len(pending) > OPEN_CALLS_MAX:  # bounded: the oldest result is lost
        del pending[next(iter(pending))]
