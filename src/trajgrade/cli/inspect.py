"""The commands that read without grading a run: ``check`` (validate a
config), ``graders`` and ``formats`` (list what is built in or installed),
``convert`` (any log as canonical events) and ``stats`` (per-trace counts).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from trajgrade.cli.options import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    check_format,
    config_option,
    format_option,
    load_policy,
)
from trajgrade.graders.matching._agents import AGENT_NAMES

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ("check", "convert", "formats", "graders", "stats")


@click.command()
@config_option("Grader config to validate.")
@click.option(
    "--allow-code",
    is_flag=True,
    help="Also import graders/extractors named as path.py:function, to validate them.",
)
@click.option(
    "--agent",
    "agents",
    multiple=True,
    type=click.Choice(AGENT_NAMES),
    help="Warn about tool matchers that can never work on this agent's tools (repeatable); also list the programs' capabilities.",
)
def check(config_path: str, allow_code: bool, agents: tuple[str, ...]) -> None:
    """Validate a config; print every error with file, line and field."""
    from trajgrade.config.agent_check import agent_warnings, capability_table
    from trajgrade.graders import BuildContext

    suite = load_policy(config_path, BuildContext(allow_code=allow_code))
    for agent in agents:
        for warning in agent_warnings(suite, agent):
            click.echo(f"warning: {agent}: {warning}", err=True)
    click.echo(
        f"{config_path}: ok, {len(suite.graders)} grader(s): {', '.join(g.name for g in suite.graders)}"
    )
    _print_protect(suite.graders)
    if agents:
        click.echo("\n".join(capability_table()))


def _print_protect(compiled: Sequence[Any]) -> None:
    """The ``protect:`` section with its profile's values filled in: what
    the guard will decide by (lists are replaced, never merged)."""
    import msgspec
    import yaml

    from trajgrade.graders.protect.grader import Protect

    for g in compiled:
        if isinstance(g, Protect):
            section = msgspec.to_builtins(g.section)
            click.echo(f"# {g.name}: resolved against the {g.section.profile} profile")
            click.echo(yaml.safe_dump({"protect": section}, sort_keys=False).rstrip())


@click.command()
def graders() -> None:
    """List the grader types, one line each."""
    from trajgrade.graders import provider, registry, type_names

    types = registry()
    width = max(len(k) for k in types)
    for kind in sorted(types):
        t = types[kind]
        if t.kind != kind:
            continue  # an alias; listed with its type
        origin = provider(kind)
        plugin = "" if origin == "trajgrade" else f" [plugin: {origin}]"
        aliases = type_names(t)[1:]
        also = f" (also: {', '.join(aliases)})" if aliases else ""
        click.echo(f"{kind:<{width}}  {t.summary}{also}{plugin}")


@click.command()
def formats() -> None:
    """List the input formats, one line each."""
    from trajgrade.formats import BUILTIN

    width = max(len(k) for k in BUILTIN)
    for name in sorted(BUILTIN):
        click.echo(f"{name:<{width}}  {BUILTIN[name].summary}")


@click.command()
@click.argument("inputs", nargs=-1, type=str)
@format_option()
def convert(inputs: tuple[str, ...], fmt: str) -> None:
    """Write the canonical JSONL events any supported log is read as."""
    from trajgrade.cli.convert import convert as run_convert
    from trajgrade.errors import SourceError
    from trajgrade.runtime import log as tlog

    check_format(fmt)
    tlog.configure(level="warning")
    _hint_when_terminal("convert", inputs)
    try:
        errors = run_convert(
            list(inputs) or ["-"], fmt=fmt, out=sys.stdout.buffer, log=tlog.get_logger()
        )
    except SourceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    sys.exit(EXIT_FAILED if errors else EXIT_OK)


@click.command()
@click.argument("inputs", nargs=-1, type=str)
@format_option()
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="One JSON object per trace instead of a table.",
)
def stats(inputs: tuple[str, ...], fmt: str, as_json: bool) -> None:
    """Per trace: tool calls by name, results, unanswered calls, errors, turns, tokens, duration."""
    import msgspec

    from trajgrade.cli.convert import print_stats
    from trajgrade.cli.convert import stats as run_stats
    from trajgrade.errors import SourceError
    from trajgrade.runtime import log as tlog

    check_format(fmt)
    tlog.configure(level="warning")
    _hint_when_terminal("stats", inputs)
    try:
        rows, errors = run_stats(list(inputs) or ["-"], fmt=fmt, log=tlog.get_logger())
    except SourceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    if as_json:
        for row in rows:
            sys.stdout.buffer.write(msgspec.json.encode(row) + b"\n")
    else:
        print_stats(rows)
    sys.exit(EXIT_FAILED if errors else EXIT_OK)


def _hint_when_terminal(command: str, inputs: tuple[str, ...]) -> None:
    """Say so when stdin (no file, or '-') is a terminal: else it looks like a hang."""
    from trajgrade.runtime.stdin_hint import hint_stdin, stdin_is_terminal

    if (not inputs or "-" in inputs) and stdin_is_terminal():
        hint_stdin(command)
