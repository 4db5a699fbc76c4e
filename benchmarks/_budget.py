"""What a speed target leaves for grading, from figures of the same run.

A target "X at least r times as fast as B" allows X ``B's seconds / r``.
Every Python grader of the corpus first pays what does not depend on its
checks: reading the file, the nesting bound trajgrade owes its users, and
decoding into the slimmest event class that holds what the checks read
(``hand_loop.py --bounded --decode-only``). trajgrade also pays its own
start-up (imports, config, event loop) beyond that program's, measured on
an empty input. What the target allows minus those is the time left to
grade every event and write the verdicts; the hand-written loop's six
checks (its bounded run minus the decode-only run) say what grading costs
when it is written out by hand for one config.

The figures are medians of whole processes; ``run.py`` prints the result
under each speed target.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Budget:
    """One speed target's time, split (seconds, wall)."""

    #: What the target allows: the other program's time / the least ratio.
    allowed_s: float
    #: Read + nesting bound + slim decode, whole process.
    decode_s: float
    #: trajgrade's start-up beyond the decode-only program's (empty input).
    startup_s: float
    #: The hand-written six checks alone, when measured.
    hand_checks_s: float | None

    @property
    def left_s(self) -> float:
        """What remains for grading and verdicts (negative: nothing)."""
        return self.allowed_s - self.decode_s - self.startup_s


def budget(
    base_s: float | None,
    least: float,
    decode_s: float | None,
    startup_s: float | None,
    hand_s: float | None,
) -> Budget | None:
    """The split, or None when a figure it needs was not measured."""
    if base_s is None or decode_s is None or startup_s is None:
        return None
    return Budget(
        allowed_s=base_s / least,
        decode_s=decode_s,
        startup_s=startup_s,
        hand_checks_s=None if hand_s is None else hand_s - decode_s,
    )


def describe(b: Budget, events: int) -> str:
    """One line under a target."""
    hand = (
        ""
        if b.hand_checks_s is None
        else f" (the hand-written loop's six checks alone: {b.hand_checks_s:.2f} s)"
    )
    return (
        f"allows {b.allowed_s:.2f} s; reading, bounding and decoding take "
        f"{b.decode_s:.2f} s and trajgrade's start-up {b.startup_s:.2f} s, "
        f"leaving {b.left_s:.2f} s to grade {events:,} events and write the "
        f"verdicts{hand}"
    )
