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
                where = str(exc).rpartition(" - at `$")[2].rstrip("`")
                field = where.lstrip(".") if " - at `$" in str(exc) else ""
                path = (
                    PROTECT,
                    *[
                        p
                        for p in field.replace("[", ".").replace("]", "").split(".")
                        if p
                    ],
                )
                raise ConfigError(
                    f"{str(exc).partition(' - at ')[0]}; see docs/guard-layers.md",
                    location=config.locate(
                        [int(p) if p.isdigit() else p for p in path]
                    ),
                ) from None
            return resolved(section)
    return None


def _field_path(at: str) -> list[str | int]:
    """msgspec's ``.secrets[0]`` as a field path."""
    parts = at.replace("[", ".").replace("]", "").split(".")
    return [int(p) if p.isdigit() else p for p in parts if p]
