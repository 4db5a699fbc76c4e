"""The agent's process group in ``trajgrade run``: signals, and what is left.

The agent runs in a session of its own, so its process id is also its
process group's, and a signal to the group reaches the tool processes it
started (the shell running the offending command) as well.
"""

from __future__ import annotations

import os
import signal
from typing import Any, Final

import anyio

__all__ = (
    "JOB_STOPS",
    "exited",
    "group_alive",
    "kill_group",
    "stop_leftovers",
    "suspend_with",
)


def kill_group(pid: int, sig: int) -> None:
    """Send ``sig`` to the process group ``pid``, if it is still there."""
    try:
        os.killpg(pid, sig)
    except OSError:
        pass  # the group is gone already


def exited(proc: Any) -> bool:
    """Whether the agent has exited, even if not reaped yet: a fail read
    from output it wrote before exiting is a graded fail, not a stop.
    (``WNOWAIT`` leaves the exit status to the event loop's reaper.)"""
    if proc.returncode is not None:
        return True
    try:
        return (
            os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            is not None
        )
    except ChildProcessError:
        return True  # reaped already


def group_alive(pid: int) -> bool:
    """Whether any process is left in the process group ``pid``."""
    try:
        os.killpg(pid, 0)
    except PermissionError:
        return True  # one is, but it changed its user
    except OSError:
        return False
    return True


async def stop_leftovers(pid: int, grace: float, log: Any) -> None:
    """Stop what the agent left running in its group (background jobs of
    its tools): SIGTERM, then SIGKILL after ``grace`` seconds. Nothing the
    agent started may run on unwatched once trajgrade is gone."""
    if not group_alive(pid):
        return
    log.warning(
        "agent_processes_left",
        pid=pid,
        reason=f"processes the agent started were still running when it exited; they are stopped (SIGTERM, then SIGKILL after {grace:g}s)",
    )
    kill_group(pid, signal.SIGTERM)
    with anyio.move_on_after(grace):
        # Polled: no event tells when a process group empties (its members
        # are not our children).
        while group_alive(pid):  # noqa: ASYNC110
            await anyio.sleep(0.02)
        return
    kill_group(pid, signal.SIGKILL)


#: Job-control stops (Ctrl-Z, a background job touching the terminal).
JOB_STOPS: Final = (signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU)


def suspend_with(pid: int | None, signum: int) -> None:
    """trajgrade is being suspended (Ctrl-Z): stop the agent's group too,
    then stop; on SIGCONT (``fg``) continue the group. The agent has a
    session of its own, so the terminal's signal never reaches it: it would
    run on, its tool calls unwatched, while trajgrade is suspended."""
    if pid is not None:
        kill_group(pid, signal.SIGSTOP)
    handler = signal.signal(signum, signal.SIG_DFL)
    try:
        # Stopped inside this call until SIGCONT. (The kernel discards it
        # in an orphaned process group: then the agent continues at once.)
        os.kill(os.getpid(), signum)
    finally:
        signal.signal(signum, handler)
        if pid is not None:
            kill_group(pid, signal.SIGCONT)
