"""The policy's ``protect:`` section as the agents' own sandbox settings (``hook install --sandbox``).

Claude Code (keys verified in the 2.1.197 bundle, ``claude`` binary of
``@anthropic-ai/claude-code-linux-x64``: its settings schema object
``sandbox`` with ``enabled``, ``failIfUnavailable``,
``autoAllowBashIfSandboxed``, ``allowUnsandboxedCommands``,
``network.allowedDomains``, ``filesystem.{denyRead,denyWrite,allowRead,allowWrite}``),
and how it reads the paths (same bundle):

* ``~/x`` is the home, ``/x`` is absolute (``//x`` too). A relative entry
  (``.env``, ``./.env``, ``**/.env``) is *not* honoured by 2.1.197: with
  one, ``cat .e*`` in the sandbox still read the file (the real-CLI test,
  tests/hooks/test_real_agents_sandbox.py). So a project install writes
  the project's secrets as absolute globs under the project root; a
  ``--user`` install (no one project) leaves them to the hook layer, and
  says so.
* The project's ``.claude/`` directory must not be named in ``denyWrite``:
  Claude Code mounts files inside it (``.claude/commands``) and every Bash
  command then fails (``bwrap: Can't create file at …/.claude/commands:
  Read-only file system``). Its settings files are named instead.
* ``denyRead`` globs (``*``, ``?``, ``**/``) are expanded on Linux at every
  sandboxed command, from their literal prefix; a trailing ``/**`` is the
  directory itself. ``denyWrite`` globs are *skipped* on Linux, so they are
  expanded here, at install, and the rest is literal paths.
* ``failIfUnavailable: true`` makes a sandbox that cannot start a startup
  error; without it Claude Code warns and runs commands unsandboxed.
* Only the Bash tool's commands run in the sandbox (the one caller of its
  sandbox wrapper); hooks and the agent's own file tools do not, which is
  why the hooks keep judging every call.

Codex and Gemini CLI: see :func:`codex_sandbox` and :func:`gemini_sandbox`.
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
from typing import TYPE_CHECKING, Any, Final

from trajgrade.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Iterable

    from trajgrade.graders.protect.config import ProtectConfig

__all__ = (
    "CLAUDE_TOOLS",
    "SandboxPlan",
    "claude_sandbox",
    "gemini_sandbox",
    "require_claude_sandbox",
)

#: What Claude Code's Linux sandbox runs, by program, and the Debian/Ubuntu
#: package that ships it.
CLAUDE_TOOLS: Final = (("bwrap", "bubblewrap"), ("socat", "socat"))


class SandboxPlan:
    """The ``sandbox`` object for one settings file, and what it could not say."""

    __slots__ = ("left_to_hooks", "settings")

    def __init__(self, settings: dict[str, Any], left_to_hooks: list[str]) -> None:
        self.settings = settings
        #: Secrets the sandbox cannot express at this scope: the hook layer holds them.
        self.left_to_hooks = left_to_hooks


def require_claude_sandbox(
    path_env: str | None = None, platform: str = sys.platform
) -> None:
    """Raise ConfigError naming the packages when Claude Code's sandbox
    could not start here (it would then run commands unsandboxed)."""
    if platform == "darwin":
        return  # Seatbelt (sandbox-exec) ships with macOS
    if not platform.startswith("linux"):
        msg = f"Claude Code's sandbox runs on Linux and macOS only (this is {platform}); install without --sandbox, the hook layer alone guards then"
        raise ConfigError(msg)
    missing = [
        (prog, pkg)
        for prog, pkg in CLAUDE_TOOLS
        if shutil.which(prog, path=path_env) is None
    ]
    if missing:
        progs = ", ".join(p for p, _ in missing)
        pkgs = " ".join(pkg for _, pkg in missing)
        msg = (
            f"Claude Code's sandbox cannot start here: {progs} not found on PATH; "
            f"install it (Debian/Ubuntu: sudo apt-get install {pkgs}; Fedora: "
            f"sudo dnf install {pkgs}), then run the install again"
        )
        raise ConfigError(msg)


def _home_form(path: str, home: str) -> str:
    """An absolute path as Claude Code reads it: ``~/…`` under the home."""
    if path == home or path.startswith(home.rstrip("/") + "/"):
        return "~/" + os.path.relpath(path, home) if path != home else "~"
    return path


def _read_paths(
    patterns: Iterable[str], *, user: bool, project: str, home: str
) -> tuple[list[str], list[str]]:
    """The globs in Claude Code's path forms; and those it cannot place."""
    out: list[str] = []
    left: list[str] = []
    for pattern in patterns:
        if pattern.startswith(("~/", "/")):
            out.append(pattern)
        elif user:
            left.append(pattern)  # no one project root to anchor it to
        else:
            # Relative to the project root, as the policy means it; written
            # absolute, the one form Claude Code honours.
            relative = pattern.removeprefix("./")
            out.append(_home_form(os.path.join(project, relative), home))
    return out, left


def _write_paths(patterns: Iterable[str], *, project: str, home: str) -> list[str]:
    """Literal paths for ``denyWrite`` (its globs are skipped on Linux):
    a trailing ``/**`` is the directory; other globs are expanded now."""
    out: list[str] = []
    for pattern in patterns:
        full = (
            os.path.join(home, pattern[2:])
            if pattern.startswith("~/")
            else os.path.join(project, pattern)
        )
        if full.endswith("/**") and not glob.has_magic(full[:-3]):
            full = full[:-3]
        if glob.has_magic(full):
            out += sorted(glob.glob(full, recursive=True, include_hidden=True))[:1000]
        else:
            out.append(full)
    return [_home_form(os.path.normpath(p), home) for p in out]


def claude_sandbox(
    protect: ProtectConfig,
    *,
    user: bool,
    project: str,
    home: str,
    hidden: Iterable[str],
    read_only: Iterable[str],
) -> SandboxPlan:
    """Claude Code's ``sandbox`` settings for ``protect``.

    ``hidden``: guard files no sandboxed process may read (trajgrade's
    state directory, with the host key: a hook call made from the agent's
    shell cannot pass as the host's; the serve token file).
    ``read_only``: guard files no sandboxed process may change (the policy,
    the state directory, trajgrade's installation).
    """
    deny_read, left = _read_paths(
        protect.secrets or (), user=user, project=project, home=home
    )
    deny_read += [_home_form(os.path.abspath(p), home) for p in hidden]
    agent_files = [
        os.path.join(home, ".claude", "settings.json"),
        os.path.join(home, ".claude", "settings.local.json"),
        os.path.join(home, ".claude", "hooks"),
        os.path.join(home, ".claude.json"),
    ]
    if not user:
        agent_files += [
            os.path.join(project, ".claude", "settings.json"),
            os.path.join(project, ".claude", "settings.local.json"),
        ]
    deny_write = _write_paths(protect.read_only or (), project=project, home=home)
    deny_write += [
        _home_form(os.path.abspath(p), home) for p in (*read_only, *agent_files)
    ]
    settings: dict[str, Any] = {
        "enabled": True,
        # A sandbox that cannot start is an error, never unsandboxed commands.
        "failIfUnavailable": True,
        # No dangerouslyDisableSandbox escape hatch.
        "allowUnsandboxedCommands": False,
        # The hooks still judge every Bash call (ask/deny from the policy);
        # Claude Code's own prompt would only repeat what the sandbox holds.
        "autoAllowBashIfSandboxed": True,
        "filesystem": {
            "denyRead": list(dict.fromkeys(deny_read)),
            "denyWrite": list(dict.fromkeys(deny_write)),
        },
        # Claude Code's own model requests do not go through the sandbox.
        "network": {"allowedDomains": list((protect.network or _NO_NET).allow)},
    }
    return SandboxPlan(settings, left)


class _NoNetwork:
    allow: tuple[str, ...] = ()


_NO_NET: Final = _NoNetwork()


def merged_sandbox(settings: dict[str, Any], sandbox: dict[str, Any]) -> dict[str, Any]:
    """``settings`` with ``sandbox`` merged in (a new dict): the keys
    trajgrade sets are replaced, every other key of the user's ``sandbox``
    (``excludedCommands``, ``ignoreViolations``, …) is kept."""
    current = settings.get("sandbox")
    if current is not None and not isinstance(current, dict):
        msg = "`sandbox` is not an object; fix the file, then run the command again"
        raise ConfigError(msg)
    out = dict(current or {})
    for key, value in sandbox.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return {**settings, "sandbox": out}


#: Gemini CLI 0.61.0's ``tools.sandbox`` values that start a sandbox here,
#: by platform (its getSandboxCommand: docker, podman, sandbox-exec, runsc, lxc).
_GEMINI_COMMANDS: Final = {"darwin": ("sandbox-exec",), "linux": ("docker", "podman")}


def gemini_sandbox(path_env: str | None = None, platform: str = sys.platform) -> str:
    """The ``tools.sandbox`` command for Gemini CLI here; ConfigError when
    none can run (on Linux its sandbox is a container: docker or podman)."""
    key = "darwin" if platform == "darwin" else "linux"
    for command in _GEMINI_COMMANDS[key]:
        if shutil.which(command, path=path_env) is not None:
            return command
    msg = (
        "Gemini CLI's sandbox cannot start here: on Linux it runs the agent in a "
        "docker or podman container and neither is on PATH (Debian/Ubuntu: "
        "sudo apt-get install podman); install one, or install without --sandbox "
        "(the hook layer alone guards then; `trajgrade run --sandbox -- gemini …` "
        "is the bubblewrap alternative)"
    )
    raise ConfigError(msg)
