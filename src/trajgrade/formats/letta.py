"""Letta message lists: a list of turns, each a list of messages (seed 002). Being implemented (issue #4):
until then this module contributes no format."""

from __future__ import annotations

from typing import Any, Final

__all__ = ("FORMATS",)

#: What this module contributes to the registry.
FORMATS: Final[tuple[Any, ...]] = ()
