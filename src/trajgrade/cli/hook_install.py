"""What ``trajgrade hook install`` adds beyond the hook registration: the
pin and the host key in the command, and the agents' sandbox settings
(``--sandbox``), compiled from the policy's ``protect:`` section.

Kept apart from :mod:`trajgrade.cli.hooks` (the click commands): this is
the guard's install-time plan, one function per agent's sandbox.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from collections.abc import Callable

    from trajgrade.graders.protect.config import ProtectConfig

__all__ = ("check_server", "guard_words", "protect_section", "sandbox_plan")

#: The warning ``--fail-open`` prints.
FAIL_OPEN_WARNING = (
    "warning: --fail-open: a hook that cannot grade (a broken payload, an internal "
    "error) lets the call run; a guard that fails open is a tripwire, not a boundary"
)


def guard_words(config_path: str, state_dir: str, *, dry_run: bool) -> list[str]:
    """``--pin`` and ``--host-key`` for the hook command (the key is made
    in ``state_dir`` unless ``dry_run``)."""
    from trajgrade.hooks.pin import ensure_host_key, host_key_id, policy_digest

    words = ["--pin", policy_digest(config_path)]
    key = host_key_id(state_dir)
    if key is None and not dry_run:
        key = ensure_host_key(state_dir)
    words += ["--host-key", key or "<made at install>"]
    return words


def protect_section(config_path: str) -> ProtectConfig:
    """The policy's resolved ``protect:``; the standard profile without one."""
    from trajgrade.config.decode import load_config
    from trajgrade.config.protect import protect_of
    from trajgrade.graders.protect.config import ProtectConfig
    from trajgrade.graders.protect.profiles import resolved

    return protect_of(load_config(config_path)) or resolved(ProtectConfig())


def sandbox_plan(
    agent: str,
    *,
    config_path: str,
    user: bool,
    state_dir: str,
    token_file: str | None,
) -> tuple[Callable[[dict[str, Any]], dict[str, Any]] | None, list[tuple[str, str]]]:
    """The merge into the hook settings file, and other files to write,
    for ``agent``'s sandbox. ConfigError when it cannot start here."""
    if agent == "claude-code":
        return _claude(config_path, user, state_dir, token_file), []
    if agent == "gemini":
        from trajgrade.sandbox.host_settings import gemini_sandbox

        command = gemini_sandbox()

        def gemini(settings: dict[str, Any]) -> dict[str, Any]:
            tools = settings.get("tools")
            tools = dict(tools) if isinstance(tools, dict) else {}
            return {**settings, "tools": {**tools, "sandbox": command}}

        return gemini, []
    return None, [_codex()]


def _claude(
    config_path: str, user: bool, state_dir: str, token_file: str | None
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    from trajgrade.graders.protect.self_guard import installation
    from trajgrade.sandbox.host_settings import (
        claude_sandbox,
        merged_sandbox,
        require_claude_sandbox,
    )

    require_claude_sandbox()
    home = os.path.expanduser("~")
    hidden = [state_dir, *([token_file] if token_file else [])]
    plan = claude_sandbox(
        protect_section(config_path),
        user=user,
        project=os.getcwd(),
        home=home,
        hidden=hidden,
        read_only=[
            os.path.abspath(config_path),
            state_dir,
            *installation(),
            sys.prefix,
        ],
    )
    for pattern in plan.left_to_hooks:
        click.echo(
            f"warning: --user: the secret {pattern!r} is relative to the project, which "
            "the user's settings cannot name (Claude Code reads it relative to ~/.claude); "
            "the hook layer holds it, or install --project in the project as well",
            err=True,
        )
    return lambda settings: merged_sandbox(settings, plan.settings)


def _codex() -> tuple[str, str]:
    from trajgrade.sandbox.codex_config import merged_codex_config

    home = os.environ.get("CODEX_HOME") or os.path.join(
        os.path.expanduser("~"), ".codex"
    )
    path = os.path.join(home, "config.toml")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        text = ""
    click.echo(
        "note: Codex's sandbox confines writes and turns the network off; it does not "
        "hide reads, so the secrets rely on the hook layer there",
        err=True,
    )
    return path, merged_codex_config(text)


def check_server(
    url: str,
    config_path: str | None,
    state_dir: str | None,
    allow_code: bool,
    *,
    sandbox: bool = False,
) -> None:
    """Usage errors for a ``--server`` install the hook could never use: a
    URL the client refuses (every call would fail open), or options that
    belong to the daemon (they would be dropped without a word). With
    ``--sandbox``, ``-c`` names the policy the daemon runs (its ``protect:``
    section becomes the agent's sandbox, and the file is made read-only
    there) and ``--state-dir`` the daemon's state (hidden there)."""
    from trajgrade.hooks.client import server_address

    try:
        server_address(url)
        ok = url.startswith("http://")  # (an http hook's url needs the scheme)
    except ValueError:
        ok = False
    if not ok:
        msg = f"expected http://HOST:PORT, e.g. http://127.0.0.1:8787 (got {url!r})"
        raise click.BadParameter(msg, param_hint="--server")
    daemon = [
        flag
        for flag, given in (
            ("-c", config_path and not sandbox),
            ("--state-dir", state_dir and not sandbox),
            ("--allow-code", allow_code),
        )
        if given
    ]
    if daemon:
        msg = (
            f"{', '.join(daemon)} with --server: the daemon has the policy and the "
            f"state; give them to `trajgrade serve`, and drop them here"
        )
        raise click.UsageError(msg)
    if sandbox and config_path is None:
        msg = (
            "--sandbox with --server needs -c POLICY: the policy the daemon runs, "
            "whose protect: section the agent's sandbox is made from (and "
            "--state-dir DIR: the daemon's, to hide it from the sandbox)"
        )
        raise click.UsageError(msg)
