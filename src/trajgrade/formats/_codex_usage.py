"""Per-response token usage from Codex's cumulative totals.

Codex writes the session's running total (``token_count`` in rollouts,
``turn.completed`` in ``exec --json``), often twice in a row. Graders sum
``usage`` events, so each new total becomes the difference from the last one
seen; :mod:`trajgrade.formats.codex` documents the rules.
"""

from __future__ import annotations

from operator import sub
from typing import Any, Final

from trajgrade.events import Usage
from trajgrade.formats._codex_items import BadRecord

__all__ = ("UsageDeltas",)

#: Codex's token-count keys, in the order of a totals tuple.
_KEYS: Final = (
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "reasoning_output_tokens",
    "cache_write_input_tokens",
)


def _totals(counts: Any, where: str) -> tuple[int, ...]:
    if not isinstance(counts, dict):
        msg = f"`{where}` must be an object of token counts"
        raise BadRecord(msg, where)
    out = []
    for key in _KEYS:
        value = counts.get(key)
        if value is None:
            value = 0  # absent in older versions (cache writes, reasoning)
        elif type(value) is not int or value < 0:  # (bool is not int here)
            msg = f"`{where}.{key}` must be a non-negative integer, got {value!r}"
            raise BadRecord(msg, f"{where}.{key}")
        out.append(value)
    return tuple(out)


class UsageDeltas:
    """The last totals of one session, and the delta each new total adds."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: tuple[int, ...] | None = None

    def reset(self) -> None:
        """A new session: its totals start from zero."""
        self._last = None

    def usage(
        self,
        counts: Any,
        where: str,
        tid: str,
        ts: float | None,
        model: str | None = None,
    ) -> Usage | None:
        """The usage a new running total adds, or None when it adds nothing."""
        totals = _totals(counts, where)
        last = self._last
        if totals == last:
            return None  # the same total written again
        self._last = totals
        if last is not None:
            delta = tuple(map(sub, totals, last))
            if min(delta) >= 0:
                totals = delta
            # else: a count went down because the counters restarted (a
            # resumed session): the new total is all new usage.
        if not any(totals):
            return None
        inp, cached, out, reasoning, written = totals
        return Usage(
            trace_id=tid,
            ts=ts,
            input_tokens=inp,
            output_tokens=out,
            cache_read_tokens=cached,
            cache_write_tokens=written,
            reasoning_tokens=reasoning,
            model=model,
        )
