"""The ``tool-calls`` grader's texts that depend only on its entries."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from trajgrade.graders.matching._tool_match import Matcher

__all__ = ("pass_text", "sequence_text")


def sequence_text(cursor: int, sequence: Sequence[Matcher]) -> str:
    """Why an unfinished ``sequence`` fails: how far it got, what is next."""
    nxt = sequence[cursor]
    return f"sequence matched {cursor} of {len(sequence)} entries; missing {nxt.where} {nxt.label} after them"


def pass_text(n_required: int, n_disallowed: int, n_sequence: int) -> str:
    """A pass's evidence: the same for every trace."""
    parts = []
    if n_required:
        parts.append(f"{n_required} required satisfied")
    if n_disallowed:
        parts.append(f"{n_disallowed} disallowed not called")
    if n_sequence:
        parts.append(f"sequence of {n_sequence} in order")
    return "; ".join(parts)
