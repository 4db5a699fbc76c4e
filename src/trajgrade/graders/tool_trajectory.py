"""agentv ``tool_trajectory`` (seed 001). Being implemented (issue #4):
until then this module contributes no grader type."""

from __future__ import annotations

from typing import Any, Final

__all__ = ("GRADER_TYPES",)

#: What this module contributes to the registry.
GRADER_TYPES: Final[tuple[Any, ...]] = ()
