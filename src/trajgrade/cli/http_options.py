"""Click options for the HTTP edge's limits, shared by ``serve`` and ``grade --otlp``."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, TypeVar

import click

from trajgrade.cli.types import FiniteFloat

if TYPE_CHECKING:
    from collections.abc import Callable

    from trajgrade.runtime.http_edge import Limits

__all__ = ("edge_limits", "http_limit_options")

F = TypeVar("F", bound="Callable[..., Any]")

#: Default body limit (16 MiB): far above a hook payload or an OTLP batch.
DEFAULT_MAX_BODY = 16 * 1024 * 1024


def http_limit_options(prefix: str = "") -> Callable[[F], F]:
    """``--{prefix}max-body``, ``--{prefix}read-timeout``, ``--{prefix}token-env``."""

    def wrap(f: F) -> F:
        f = click.option(
            f"--{prefix}token-env",
            f"{prefix.replace('-', '_')}token_env",
            metavar="VAR",
            default=None,
            help="Require `Authorization: Bearer <token>`, the token read from this environment variable.",
        )(f)
        f = click.option(
            f"--{prefix}read-timeout",
            f"{prefix.replace('-', '_')}read_timeout",
            type=FiniteFloat(min=0.01),
            default=30.0,
            show_default=True,
            help="Seconds a socket read (and a whole body) may take; slower peers get 408.",
        )(f)
        return click.option(
            f"--{prefix}max-body",
            f"{prefix.replace('-', '_')}max_body",
            type=click.IntRange(min=1),
            default=DEFAULT_MAX_BODY,
            show_default=True,
            help="Largest request body in bytes (also once gunzipped); larger gets 413.",
        )(f)

    return wrap


def edge_limits(max_body: int, read_timeout: float, token_env: str | None) -> Limits:
    """The limits from the options; a named token variable must be set."""
    from trajgrade.runtime.http_edge import Limits

    token = None
    if token_env is not None:
        token = os.environ.get(token_env)
        if not token:
            msg = (
                f"--token-env {token_env}: the environment variable is not set or empty"
            )
            raise click.UsageError(msg)
    return Limits(
        max_body=max_body,
        timeout=read_timeout,
        body_timeout=read_timeout,
        token=token,
    )


def serve_problem(exc: OSError, host: str, port: int) -> str:
    """What went wrong starting ``trajgrade serve``, and what to do about it."""
    import errno

    why = exc.strerror or str(exc)
    if exc.filename is not None:
        from trajgrade.hooks.invoke import STATE_DIR_HINT

        return (
            f"{exc.filename}: cannot use the state directory: {why}; {STATE_DIR_HINT}"
        )
    if exc.errno == errno.EADDRINUSE:
        return f"cannot listen on {host}:{port}: the port is in use (another trajgrade serve?); stop that process, or pick another --port (0: any free port)"
    return f"cannot listen on {host}:{port}: {why}; check --host and --port"
