"""The line a command writes when it is about to read stdin from a terminal.

A command that reads stdin and was given no file would wait in silence on a
terminal, which looks like a hang. ``grade``, ``convert``, ``stats`` and
``hook AGENT`` say instead what they wait for and how to give it. The hook's
cold path imports this module, so it imports nothing but ``sys``.
"""

from __future__ import annotations

import sys
from typing import Final

__all__ = ("HINTS", "hint_stdin", "stdin_is_terminal")

#: What each command waits for on a terminal, and the ways to give it.
HINTS: Final = {
    "grade": (
        "trajgrade: reading events from stdin; type or paste JSON lines and end "
        "with Ctrl-D, or pipe a log in (tail -f LOG | trajgrade grade ...), or "
        "name files"
    ),
    "convert": (
        "trajgrade convert: reading a log from stdin; type or paste its lines and "
        "end with Ctrl-D, or pipe a log in (trajgrade convert < LOG), or name files"
    ),
    "stats": (
        "trajgrade stats: reading a log from stdin; type or paste its lines and "
        "end with Ctrl-D, or pipe a log in (trajgrade stats < LOG), or name files"
    ),
    "hook": (
        "trajgrade hook {agent}: expects a hook payload on stdin from the agent "
        "(one JSON object per tool call; `trajgrade hook install {agent} -c "
        "POLICY` registers it); to try it by hand, pipe a payload in "
        "(trajgrade hook {agent} -c POLICY < payload.json), or type one and end "
        "with Ctrl-D"
    ),
}


def stdin_is_terminal() -> bool:
    """Whether stdin is open and a terminal (closed or odd: not one)."""
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (OSError, ValueError):  # a closed or detached stream
        return False


def hint_stdin(command: str, **fields: str) -> None:
    """Write ``command``'s hint to stderr (nothing when stderr is closed)."""
    if sys.stderr is None:
        return
    try:
        sys.stderr.write(HINTS[command].format(**fields) + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass  # a hint is not worth failing the command for
