"""Verdicts: what graders decide, and the finality rule in one place.

A grader returns a :class:`Decision`; the engine stamps it into a
:class:`Verdict` with the trace, the grader, and a deterministic id.

Finality has two levels, because some graders know their outcome before they
know their score:

* **sealed**: the *outcome* can no longer change (a disallowed tool was
  called; a token budget was exceeded). Emitted the moment it is known, so a
  running agent can be stopped.
* **final**: outcome *and* score can no longer change. Every trace gets
  exactly one final verdict per grader: early, at its ``trace_end``, or at end
  of input. A final verdict is always sealed.

A budget grader that crosses ``max`` emits a sealed, non-final fail at once,
and its final verdict (same outcome, final score) when the trace ends or the
score reaches its floor. A sealed outcome never flips: the final verdict
always repeats it.
"""

from __future__ import annotations

import enum
from typing import Any

import msgspec

from trajgrade._digest import blake2b

__all__ = ("Decision", "Outcome", "Verdict", "verdict_id")


class Outcome(enum.StrEnum):
    """The outcome of one grader on one trace."""

    PASS = "pass"
    FAIL = "fail"
    #: The grader could not decide: bad config for this trace, a regex timed
    #: out, events were lost. Never silently a pass.
    ERROR = "error"


class Decision(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What a grader says; the engine turns it into a Verdict."""

    outcome: Outcome
    score: float
    #: False for a sealed-but-not-final decision (outcome fixed, score not).
    final: bool = True
    #: Human-readable reasons in the upstream's terms.
    evidence: str = ""
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)


class Verdict(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One grader's verdict on one trace, as written to the verdict stream."""

    #: Deterministic: the same trace, grader and finality always give the same
    #: id, so consumers can drop re-emitted duplicates.
    id: str
    trace_id: str
    #: The grader's name in the suite (unique).
    grader: str
    #: The grader's type (``tool-calls``, ``token-budget``, …).
    kind: str
    outcome: Outcome
    score: float
    #: False only for a sealed verdict: the outcome is fixed, the score is
    #: not yet; the final verdict follows.
    final: bool
    #: Decided before the trace ended.
    early: bool = False
    evidence: str = ""
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    #: Number of this trace's events seen when the verdict was decided.
    at_event: int = 0
    #: Producer time of the deciding event, when known.
    ts: float | None = None

    @property
    def passed(self) -> bool:
        """True when the outcome is ``pass``."""
        return self.outcome is Outcome.PASS


def verdict_id(trace_id: str, grader: str, *, final: bool) -> str:
    """The deterministic id of a verdict (16 hex digits)."""
    key = f"{trace_id}\x00{grader}\x00{'final' if final else 'sealed'}".encode()
    return blake2b(key, digest_size=8).hexdigest()
