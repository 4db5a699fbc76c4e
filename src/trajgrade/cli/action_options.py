"""The command-line side of on-fail actions: ``--fail-fast``, ``--on-fail``,
``--on-fail-timeout``, ``--on-fail-concurrency`` and ``--signal PID[:SIGNAL]``,
parsed into one :class:`trajgrade.runtime.actions.ActionOptions` for every runner
command (``grade``, follow, Kafka, ``run``). What the actions do is
:mod:`trajgrade.runtime.actions`.
"""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING, Any, Final, TypeVar, overload

import click

from trajgrade.cli.types import FiniteFloat, given_once, require_companions
from trajgrade.runtime.actions import ActionOptions

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ("action_options", "check_signal_target", "parse_signal_target")

F = TypeVar("F", bound="Callable[..., Any]")


# ------------------------------------------------------------------ CLI
def parse_signal_target(text: str) -> tuple[int, int]:
    """``PID[:SIGNAL]`` -> (pid, signal number); SIGNAL is a name (TERM,
    SIGINT) or a number, SIGTERM when omitted. Raises ValueError with the fix."""
    pid_text, _, sig_text = text.partition(":")
    try:
        pid = int(pid_text)
    except ValueError:
        pid = 0
    if pid <= 0:
        msg = f"{text!r}: expected PID[:SIGNAL] with a positive process id, e.g. 1234 or 1234:INT"
        raise ValueError(msg)
    if not sig_text:
        return pid, int(signal.SIGTERM)
    name = sig_text.upper()
    try:
        if name.isdigit():
            return pid, int(signal.Signals(int(name)))
        return pid, int(
            signal.Signals[name if name.startswith("SIG") else f"SIG{name}"]
        )
    except (KeyError, ValueError):
        msg = f"{text!r}: unknown signal {sig_text!r}; use a name such as TERM, INT, HUP, USR1 or a number"
        raise ValueError(msg) from None


def check_signal_target(text: str, pid: int) -> None:
    """Raise ValueError with the fix when ``pid`` cannot be signalled now:
    found at start-up, not at the first fail, when it is too late to act."""
    try:
        os.kill(pid, 0)  # (signal 0: the checks of a send, nothing sent)
    except ProcessLookupError:
        msg = f"{text!r}: no process {pid} is running; give the PID of the running process to stop (e.g. `$(pgrep -n NAME)`)"
        raise ValueError(msg) from None
    except PermissionError:
        msg = f"{text!r}: process {pid} belongs to another user, so it cannot be signalled; run trajgrade as that user, or give a process of your own"
        raise ValueError(msg) from None


def _signal_targets(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> list[tuple[int, int]]:
    try:
        targets = [parse_signal_target(v) for v in value]
        for text, (pid, _) in zip(value, targets, strict=True):
            check_signal_target(text, pid)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None
    return targets


_OPTION_NAMES: Final = (
    "fail_fast",
    "on_fail",
    "on_fail_timeout",
    "on_fail_concurrency",
    "signal_targets",
)


@overload
def action_options(f: F, /) -> F: ...
@overload
def action_options(
    f: None = None, /, *, fail_fast: bool = True
) -> Callable[[F], F]: ...
def action_options(f: F | None = None, /, *, fail_fast: bool = True) -> Any:
    """Click decorator: add ``--fail-fast``, ``--on-fail``, ``--on-fail-timeout``,
    ``--on-fail-concurrency`` and ``--signal``; the command receives them as
    one ``actions: ActionOptions`` keyword argument.

    ``@action_options`` or ``@action_options(fail_fast=False)`` (for commands
    where stopping has its own option, such as ``run``).
    """

    def decorate(func: F) -> F:
        import functools

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            require_companions(
                {"on_fail_timeout": "on_fail", "on_fail_concurrency": "on_fail"}
            )
            values = {k: kwargs.pop(k) for k in _OPTION_NAMES if k in kwargs}
            values["signal_targets"] = list(values.get("signal_targets") or [])
            kwargs["actions"] = ActionOptions(**values)
            return func(*args, **kwargs)

        options = [
            click.option(
                "--on-fail",
                "on_fail",
                metavar="CMD",
                multiple=True,  # to refuse a repeat, which click would drop silently
                callback=given_once(
                    "one command per run: run both from one script or `sh -c`"
                ),
                help="Shell command run once per failed trace (fail or error), with the verdict as JSON on stdin and in TRAJGRADE_* variables.",
            ),
            click.option(
                "--on-fail-timeout",
                type=FiniteFloat(min=0.001),
                default=30.0,
                show_default=True,
                help="Seconds an --on-fail command may run before it is killed.",
            ),
            click.option(
                "--on-fail-concurrency",
                type=click.IntRange(min=1),
                default=4,
                show_default=True,
                help="--on-fail commands running at once.",
            ),
            click.option(
                "--signal",
                "signal_targets",
                metavar="PID[:SIGNAL]",
                multiple=True,
                callback=_signal_targets,
                help="Send SIGNAL (default TERM) to PID at the first fail; repeatable.",
            ),
        ]
        if fail_fast:
            options.append(
                click.option(
                    "--fail-fast",
                    is_flag=True,
                    help="Stop at the first fail: finish the open traces and exit.",
                )
            )
        decorated: Any = wrapper
        for option in reversed(options):
            decorated = option(decorated)
        return decorated  # type: ignore[no-any-return]

    if f is not None:
        return decorate(f)
    return decorate
