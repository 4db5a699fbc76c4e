"""Config files: decode, validate, locate every error, compile a Suite.

The face of the package (names load on first use). Inside, in the order a
file takes: ``_yaml`` (YAML with each upstream's schema), ``model`` (the
decoded config and the compiled suite), ``layouts`` (which upstream's layout
a file is in), ``decode`` (text to a located :class:`SuiteConfig`),
``compile`` (a :class:`Suite` from it, every error at once).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trajgrade._util.lazy import exporter

if TYPE_CHECKING:
    from trajgrade.config.compile import compile_suite, load_suite
    from trajgrade.config.decode import decode_config, load_config
    from trajgrade.config.model import (
        ConfigWarning,
        GraderSpec,
        OnFail,
        Suite,
        SuiteConfig,
        default_on_fail,
    )

__all__ = (
    "ConfigWarning",
    "GraderSpec",
    "OnFail",
    "Suite",
    "SuiteConfig",
    "compile_suite",
    "decode_config",
    "default_on_fail",
    "load_config",
    "load_suite",
)

__getattr__ = exporter(
    __name__,
    {
        "ConfigWarning": "trajgrade.config.model",
        "GraderSpec": "trajgrade.config.model",
        "OnFail": "trajgrade.config.model",
        "Suite": "trajgrade.config.model",
        "SuiteConfig": "trajgrade.config.model",
        "default_on_fail": "trajgrade.config.model",
        "decode_config": "trajgrade.config.decode",
        "load_config": "trajgrade.config.decode",
        "compile_suite": "trajgrade.config.compile",
        "load_suite": "trajgrade.config.compile",
    },
)
