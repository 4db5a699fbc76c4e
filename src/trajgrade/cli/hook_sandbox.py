"""``hook install --sandbox``: the host sandbox block written beside the hooks."""

from __future__ import annotations

import os
import sys

import click

from trajgrade.cli.options import EXIT_USAGE

__all__ = ("sandbox_settings",)


def sandbox_settings(
    agent: str, config_path: str | None, state_dir: str | None
) -> dict[str, object]:
    """The host sandbox block ``--sandbox`` writes (Claude Code only)."""
    from trajgrade.config.decode import load_config
    from trajgrade.config.protect import protect_of
    from trajgrade.errors import ConfigError
    from trajgrade.graders.protect.config import ProtectConfig
    from trajgrade.graders.protect.profiles import resolved
    from trajgrade.hooks.store import default_state_dir
    from trajgrade.sandbox.host_settings import claude_sandbox, require_sandbox_tools

    if agent != "claude-code":
        msg = f"--sandbox writes Claude Code's sandbox settings; {agent}'s own sandbox cannot hide secret files, so run it under `trajgrade run --sandbox -c POLICY -- {agent} ...` (docs/guard-layers.md)"
        raise click.UsageError(msg)
    if config_path is None:
        msg = "--sandbox needs -c POLICY: the sandbox is compiled from its protect: section"
        raise click.UsageError(msg)
    try:
        require_sandbox_tools()
        protect = protect_of(load_config(config_path)) or resolved(ProtectConfig())
    except ConfigError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    import trajgrade

    guard = (
        os.path.abspath(config_path),
        os.path.abspath(state_dir or default_state_dir()),
        os.path.dirname(os.path.abspath(trajgrade.__file__)),
    )
    block = claude_sandbox(
        protect, project=os.getcwd(), home=os.path.expanduser("~"), guard_files=guard
    )
    return {"sandbox": block}
