"""The policy's ``protect:`` section, for the layers outside the hook judge.

``hook install --sandbox`` and ``run --sandbox`` compile the same section
the ``protect`` judge decides by into the host's sandbox; they read it here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from trajgrade.config.layouts import PROTECT
from trajgrade.errors import ConfigError

if TYPE_CHECKING:
    from trajgrade.config.model import SuiteConfig
    from trajgrade.graders.protect.config import ProtectConfig

__all__ = ("protect_of",)


def protect_of(config: SuiteConfig) -> ProtectConfig | None:
    """The policy's ``protect:`` section resolved against its profile; None
    when the policy has none. A bad section is a located ConfigError."""
    from trajgrade.graders.protect.config import ProtectConfig
    from trajgrade.graders.protect.profiles import resolved

    for spec in config.graders:
        if spec.type == PROTECT and spec.path == (PROTECT,):
            try:
                section = msgspec.convert(spec.config or {}, ProtectConfig)
            except msgspec.ValidationError as exc:
                problem, _, at = str(exc).partition(" - at `$")
                msg = f"{problem}; see docs/guard-layers.md"
                where = config.locate((PROTECT, *_field_path(at.rstrip("`"))))
                raise ConfigError(msg, location=where) from None
            return resolved(section)
    return None


def _field_path(at: str) -> list[str | int]:
    """msgspec's ``.secrets[0]`` as a field path."""
    parts = at.replace("[", ".").replace("]", "").split(".")
    return [int(p) if p.isdigit() else p for p in parts if p]
