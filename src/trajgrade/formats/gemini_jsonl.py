"""Being implemented (issue #5): until then this module contributes no format."""

from __future__ import annotations

from typing import Any, Final

__all__ = ("FORMATS",)

#: What this module contributes to the registry.
FORMATS: Final[tuple[Any, ...]] = ()
