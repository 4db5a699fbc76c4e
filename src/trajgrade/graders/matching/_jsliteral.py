"""What needs no regex engine: plain-literal patterns and the pattern error.

A pattern such as ``^Bash$`` or ``rm -rf`` is matched with ``str`` methods
(:func:`literal_of`), and the ``regex`` module (the time-boxed backtracking
engine, about 10 ms to import) is loaded only when a policy has a real regular
expression: a cold ``trajgrade hook`` with a literal-only policy never pays it.
"""

from __future__ import annotations

from typing import Final

__all__ = ("CONTROL", "SYNTAX", "JSRegexError", "literal_of")

#: JavaScript control escapes.
CONTROL: Final = {"f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
#: Characters with a meaning in a pattern.
SYNTAX: Final = frozenset("^$\\.*+?()[]{}|")


class JSRegexError(ValueError):
    """Raised when a pattern is not a valid JavaScript regular expression (or uses a construct we cannot translate)."""

    def __init__(self, pattern: str, position: int | None, reason: str) -> None:
        self.pattern, self.position, self.reason = pattern, position, reason
        where = "" if position is None else f" at position {position}"
        super().__init__(
            f"invalid regular expression '{pattern}': {reason}{where}; "
            "fix the pattern (JavaScript RegExp syntax; no /.../flags: write (?i) "
            "in the pattern for case-insensitive)"
        )

    def __reduce__(self) -> tuple[type[JSRegexError], tuple[str, int | None, str]]:
        return type(self), (self.pattern, self.position, self.reason)


def literal_of(pattern: str) -> tuple[str, bool, bool] | None:
    """Return ``(text, anchored_start, anchored_end)`` if *pattern* is a plain literal.

    Only literal chars, control escapes (``\\n``...) and escaped ASCII punctuation
    qualify, between an optional leading ``^`` and trailing ``$``; anything else
    gives ``None`` (use the regex).  ``$`` is end-of-input only, so ``lit$`` is
    exactly ``endswith``.
    """
    start = pattern.startswith("^")
    i, chars = int(start), list[str]()
    while i < len(pattern):
        c = pattern[i]
        if c == "$" and i == len(pattern) - 1:
            return "".join(chars), start, True
        if c == "\\":
            e = pattern[i + 1 : i + 2]
            punctuation = len(e) == 1 and e.isascii() and not e.isalnum()
            if e not in CONTROL and not punctuation:
                return None
            chars.append(CONTROL.get(e, e))
            i += 2
        elif c in SYNTAX:
            return None
        else:
            chars.append(c)
            i += 1
    return "".join(chars), start, False
