"""The agent's process group in ``trajgrade run``: signals, and what is left.

The agent runs in a session of its own, so its process id is also its
process group's, and a signal to the group reaches the tool processes it
started (the shell running the offending command) as well, unless it ran
them in groups of their own: Gemini CLI's shell tool reports a PGID of its
own, as does anything spawned "detached". :func:`kill_tree` reaches those
too: it reads the agent's descendants from ``/proc`` (Linux) and
remembers them with their start time, because once the agent is gone its
orphans are no longer its children, and a reused pid must never be hit.
"""

from __future__ import annotations

import contextlib
import os
import signal
from typing import Any, Final

import anyio

__all__ = (
    "JOB_STOPS",
    "exited",
    "forget",
    "group_alive",
    "kill_group",
    "kill_tree",
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


#: Agent pid -> its descendants seen so far (pid -> start time).
_SEEN: dict[int, dict[int, int]] = {}


def kill_tree(pid: int, sig: int) -> None:
    """Send ``sig`` to the agent's group and to every process the agent
    started (now, or when last looked), with the groups they lead."""
    seen = _SEEN.setdefault(pid, {})
    seen.update(_descendants(pid))
    kill_group(pid, sig)
    for child, start in list(seen.items()):
        if _start_time(child) != start:
            del seen[child]  # gone; its pid may be someone else's now
            continue
        with contextlib.suppress(OSError):
            if os.getpgid(child) == child:  # a group of its own: its tools
                os.killpg(child, sig)
            os.kill(child, sig)


def forget(pid: int) -> None:
    """The run of agent ``pid`` is over."""
    _SEEN.pop(pid, None)


def _stat(pid: int | str) -> list[str] | None:
    """/proc/PID/stat from the state on (field 3 is index 0), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].decode().split()
    except (OSError, IndexError):
        return None


def _start_time(pid: int) -> int | None:
    fields = _stat(pid)
    return int(fields[19]) if fields else None


def _descendants(root: int) -> dict[int, int]:
    """The processes below ``root`` now: pid -> start time ({} without /proc)."""
    children: dict[int, list[tuple[int, int]]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return {}
    for name in names:
        if name.isdigit() and (fields := _stat(name)) is not None:
            children.setdefault(int(fields[1]), []).append((int(name), int(fields[19])))
    found: dict[int, int] = {}
    todo = [root]
    while todo:
        for pid, start in children.get(todo.pop(), ()):
            if pid not in found:
                found[pid] = start
                todo.append(pid)
    return found


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
