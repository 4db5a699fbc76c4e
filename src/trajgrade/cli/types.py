"""Command-line value types shared by every command."""

from __future__ import annotations

import math
from typing import Any

import click

__all__ = ("FiniteFloat", "given_once", "require_companions")


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


def require_companions(pairs: dict[str, str]) -> None:
    """A usage error for an option given on the command line without the
    option it works with (``--glob`` without ``--watch``): it would be
    ignored without a word. ``pairs``: parameter name -> companion's."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    flags = {p.name: p.opts[0] for p in ctx.command.params if p.opts}
    for name, companion in pairs.items():
        given = ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE
        if given and not ctx.params.get(companion):
            flag, needed = flags.get(name, name), flags.get(companion, companion)
            msg = f"{flag} works with {needed} only; add {needed}, or drop {flag}"
            raise click.UsageError(msg)


def given_once(fix: str) -> Any:
    """A click callback for an option declared ``multiple=True`` only so that
    a repeat can be seen: click keeps the last of a repeated option without a
    word, and for ``-c`` that silently drops a policy (``-c base.yaml -c
    extra.yaml`` grades with ``extra.yaml`` alone). Two or more values are a
    usage error ending in ``fix``; one is returned as is, none as None."""

    def check(
        ctx: click.Context, param: click.Parameter, value: tuple[Any, ...]
    ) -> Any:
        if len(value) > 1:
            shown = ", ".join(repr(v) for v in value)
            msg = f"given {len(value)} times ({shown}); {fix}"
            raise click.BadParameter(msg, ctx=ctx, param=param)
        return value[0] if value else None

    return check
