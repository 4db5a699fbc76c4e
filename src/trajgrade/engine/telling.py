"""What a verdict or decision tells people: the policy's ``message:`` and
the policy line of the rule that matched (issue 36).

A grader writes the sentence (what matched) and, for a rule with its own
``message:``, that message; the grader's entry may have one too. This module
puts the one that applies in front of the sentence
(:func:`~trajgrade.verdicts.told`) and fills
:attr:`~trajgrade.verdicts.Matched.line` from the policy, once per rule.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from trajgrade.verdicts import Outcome, told

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from trajgrade.config.model import Suite
    from trajgrade.graders import Grader
    from trajgrade.verdicts import Decision, Matched

__all__ = ("Telling",)

#: Rules whose line is remembered per grader, at most (rule names are a
#: policy's entries: a few dozen; the bound keeps a hostile plugin's names
#: from growing it).
_LINES_MAX = 4096


class Telling:
    """Per grader (by index): its entry's message, and its rules' lines."""

    __slots__ = ("_lines", "_locators", "messages")

    def __init__(self, suite: Suite, graders: Sequence[Grader[Any]]) -> None:
        #: The entry's ``message:`` of each grader, None without one.
        self.messages: tuple[str | None, ...] = tuple(
            suite.messages.get(g.name) for g in graders
        )
        self._locators = tuple(suite.rule_lines.get(g.name) for g in graders)
        self._lines: list[dict[str, int | None]] = [{} for _ in graders]

    def message(self, i: int, own: str | None) -> str | None:
        """The message for grader ``i``'s ruling: the rule's own, else the
        grader's."""
        return own or self.messages[i]

    def located(self, i: int, matched: Matched | None) -> Matched | None:
        """``matched`` with the policy line of its rule filled in."""
        if matched is None or matched.line is not None:
            return matched
        locate = self._locators[i]
        if locate is None:
            return matched
        lines = self._lines[i]
        rule = matched.rule
        if rule in lines:
            line = lines[rule]
        else:
            line = locate(rule)
            if len(lines) < _LINES_MAX:
                lines[rule] = line
        return matched if line is None else msgspec.structs.replace(matched, line=line)

    def verdict_parts(
        self, i: int, d: Decision
    ) -> tuple[str, Matched | None, str | None]:
        """A verdict's (evidence, matched, message) from grader ``i``'s
        decision: a pass is told no message."""
        matched = self.located(i, d.matched)
        if d.outcome is Outcome.PASS:
            return d.evidence, matched, None
        message = self.message(i, d.message)
        return told(message, d.evidence), matched, message
