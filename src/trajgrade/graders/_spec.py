"""The base of every grader config Struct, and config-error collection helpers.

Kept apart from ``trajgrade.config.model`` so grader modules can import it without
importing the loader (which imports the registry, which imports graders).
"""

from __future__ import annotations

import msgspec

from trajgrade.errors import ConfigError, ConfigErrors, Location

__all__ = ("ConfigBase", "ErrorList")


class ConfigBase(
    msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True, kw_only=True
):
    """Grader configs reject unknown keys: a typo must not silently disable a check."""


class ErrorList:
    """Collects config errors so ``trajgrade check`` can report all of them at once."""

    __slots__ = ("errors",)

    def __init__(self) -> None:
        self.errors: list[ConfigError] = []

    def add(self, field: str, message: str) -> None:
        """Record an error at ``field`` (relative to the grader's config)."""
        self.errors.append(ConfigError(message, location=Location(field=field)))

    def raise_if_any(self) -> None:
        """Raise the one error, or all of them as ConfigErrors."""
        if len(self.errors) == 1:
            raise self.errors[0]
        if self.errors:
            raise ConfigErrors(self.errors)
