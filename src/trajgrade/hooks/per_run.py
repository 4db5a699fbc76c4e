"""Hooks registered for one ``trajgrade run`` only, so that a call is refused
before it runs rather than the agent stopped after it.

Nothing of the user's own settings is changed; each agent is told of a
settings file of the run's own (in the run's private directory, read-only
inside the sandbox):

* Claude Code: ``claude --settings FILE`` (the flag adds a settings layer
  above the user's and the project's).
* Codex: a temporary ``CODEX_HOME`` seeded with the user's ``config.toml``
  and ``auth.json`` and trajgrade's ``hooks.json``, and
  ``-c features.codex_hooks=true``. Codex asks to trust hooks that are not
  managed (``/hooks``); a run that has not trusted them runs without them,
  which is why ``run`` also keeps watching the output.
* Gemini CLI: ``GEMINI_CLI_SYSTEM_SETTINGS_PATH`` pointed at a file seeded
  from the system settings file in force, with the hooks merged in (the
  system settings file overrides the user's and the project's).

Other programs get the sandbox only.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from typing import TYPE_CHECKING, Final

import msgspec

from trajgrade.hooks.install import merged

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ("HOOK_AGENTS", "RunHooks", "register")

#: Program name -> the agent name of ``trajgrade hook``.
HOOK_AGENTS: Final = {"claude": "claude-code", "codex": "codex", "gemini": "gemini"}
_GEMINI_SYSTEM: Final = "/etc/gemini-cli/settings.json"


class RunHooks(msgspec.Struct, kw_only=True):
    """How to start the agent with trajgrade's hooks for this run."""

    command: list[str]
    env: dict[str, str] = msgspec.field(default_factory=dict)
    #: Files that must stay read-only inside the sandbox.
    read_only: list[str] = msgspec.field(default_factory=list)
    #: The agent hooks were registered for (``trajgrade hook`` name), or None.
    agent: str | None = None


def register(
    command: list[str],
    *,
    trajgrade: list[str],
    options: list[str],
    workdir: str,
    env: Mapping[str, str],
) -> RunHooks:
    """``command`` with trajgrade's hooks registered for this run: the hook
    command is ``trajgrade hook AGENT options…`` (``trajgrade``: the words
    that run this installation)."""
    program = os.path.basename(command[0]) if command else ""
    agent = HOOK_AGENTS.get(program)
    if agent is None:
        return RunHooks(command=list(command))
    line = shlex.join([*trajgrade, "hook", agent, *options])
    if agent == "claude-code":
        path = _write(
            workdir,
            "claude-settings.json",
            merged({}, agent, command=line, fail_closed=True),
        )
        return RunHooks(
            command=[command[0], "--settings", path, *command[1:]],
            read_only=[path],
            agent=agent,
        )
    if agent == "codex":
        return _codex(command, line, workdir, env)
    return _gemini(command, line, workdir, env)


def _codex(
    command: list[str], line: str, workdir: str, env: Mapping[str, str]
) -> RunHooks:
    user_home = env.get("CODEX_HOME") or os.path.join(env.get("HOME", "~"), ".codex")
    home = os.path.join(workdir, "codex-home")
    os.makedirs(home, exist_ok=True)
    for name in ("config.toml", "auth.json"):
        source = os.path.join(user_home, name)
        if os.path.isfile(source):
            shutil.copy2(source, os.path.join(home, name))
    hooks = _write(
        home,
        "hooks.json",
        merged(_load(os.path.join(user_home, "hooks.json")), "codex", command=line),
    )
    config = os.path.join(home, "config.toml")
    if not os.path.exists(config):
        _write(home, "config.toml", None)
    return RunHooks(
        command=[command[0], "-c", "features.codex_hooks=true", *command[1:]],
        env={"CODEX_HOME": home},
        read_only=[hooks, config],
        agent="codex",
    )


def _gemini(
    command: list[str], line: str, workdir: str, env: Mapping[str, str]
) -> RunHooks:
    system = env.get("GEMINI_CLI_SYSTEM_SETTINGS_PATH") or _GEMINI_SYSTEM
    path = _write(
        workdir,
        "gemini-system-settings.json",
        merged(_load(system), "gemini", command=line),
    )
    return RunHooks(
        command=list(command),
        env={"GEMINI_CLI_SYSTEM_SETTINGS_PATH": path},
        read_only=[path],
        agent="gemini",
    )


def _load(path: str) -> dict[str, object]:
    """A settings file the user has, or {} (one that is not a JSON object too:
    the run's copy is trajgrade's, the user's file is left as it is)."""
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _write(folder: str, name: str, content: dict[str, object] | None) -> str:
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write("" if content is None else json.dumps(content, indent=2) + "\n")
    return path
