"""``hook install claude-code --sandbox``: the policy's ``protect:`` section
compiled into Claude Code's own sandbox settings.

Claude Code (2.1.197, the version the suite pins) runs every Bash command
under bubblewrap and socat on Linux (Seatbelt on macOS) when ``sandbox.enabled``
is set; its own tools (Read, Grep, Write, ...) and its hooks run outside the
sandbox, so the hook layer still judges those. Checked with that CLI here
(tests/hooks/test_real_agents_sandbox.py): ``denyRead`` entries must be
absolute paths (a relative ``.env`` or ``**/.env`` is ignored), and the
project's ``.claude/`` must not be listed in ``denyWrite`` (the sandbox
protects it already; listing it breaks every command). Key names are those
of the 2.1.197 bundle: ``sandbox.enabled``, ``sandbox.filesystem.denyRead``,
``sandbox.filesystem.denyWrite``, ``sandbox.network.allowedDomains``,
``sandbox.allowUnsandboxedCommands``.
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import TYPE_CHECKING, Any, Final

from trajgrade.errors import ConfigError

if TYPE_CHECKING:
    from trajgrade.graders.protect.config import ProtectConfig

__all__ = ("SandboxMissing", "claude_sandbox", "require_sandbox_tools")

#: What Claude Code's Linux sandbox runs, and the Debian/Ubuntu package of each.
_TOOLS: Final = (("bwrap", "bubblewrap"), ("socat", "socat"))


class SandboxMissing(ConfigError):
    """The host's sandbox cannot start here: an install error, never a fallback."""


def require_sandbox_tools(path: str | None = None) -> None:
    """Raise SandboxMissing naming the packages when bwrap or socat is not on PATH
    (Linux); macOS's Seatbelt needs nothing."""
    if sys.platform == "darwin":
        return
    missing = [
        (exe, pkg) for exe, pkg in _TOOLS if shutil.which(exe, path=path) is None
    ]
    if missing:
        names = ", ".join(exe for exe, _ in missing)
        pkgs = " ".join(pkg for _, pkg in missing)
        msg = (
            f"Claude Code's sandbox needs {names} on PATH, which this machine lacks: "
            f"install them (Debian/Ubuntu: apt-get install {pkgs}; Fedora: dnf install "
            f"{pkgs}; Arch: pacman -S {pkgs}) and run `hook install --sandbox` again"
        )
        raise SandboxMissing(msg)


def _absolute(glob: str, project: str, home: str) -> str:
    if glob.startswith("~/"):
        return os.path.join(home, glob[2:])
    if glob.startswith("/"):
        return glob
    return os.path.join(project, glob.removeprefix("**/"))


def claude_sandbox(
    protect: ProtectConfig,
    *,
    project: str,
    home: str,
    guard_files: tuple[str, ...],
) -> dict[str, Any]:
    """The ``sandbox`` settings block for ``protect`` (resolved)."""
    secrets = [_absolute(g, project, home) for g in protect.secrets or ()]
    read_only = [_absolute(g, project, home) for g in protect.read_only or ()]
    deny_write = [*guard_files, *read_only]
    network = protect.network.allow if protect.network is not None else ()
    return {
        "enabled": True,
        # No escape hatch: a command the sandbox refuses is not retried outside it.
        "allowUnsandboxedCommands": False,
        "filesystem": {
            "denyRead": sorted(dict.fromkeys(secrets)),
            "denyWrite": sorted(dict.fromkeys(deny_write)),
        },
        "network": {"allowedDomains": list(network)},
    }
