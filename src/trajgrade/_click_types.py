"""Command-line value types shared by every command."""

from __future__ import annotations

import math
from typing import Any

import click

__all__ = ("FiniteFloat",)


class FiniteFloat(click.FloatRange):
    """A ``FloatRange`` that refuses ``nan`` and ``inf``: ``nan`` passes any
    range check (every comparison with it is false), then crashes a timer
    or disables a limit far from the option that set it."""

    name = "float range"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> Any:
        rv = super().convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return rv
