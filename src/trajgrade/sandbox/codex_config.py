"""Codex's sandbox keys merged into ``$CODEX_HOME/config.toml`` (``hook install codex --sandbox``).

What Codex's sandbox can express (keys verified in the 0.169.0 binary of
``@openai/codex-linux-x64``: ``sandbox_mode`` with ``read-only`` /
``workspace-write`` / ``danger-full-access``, the table
``[sandbox_workspace_write]`` with ``network_access`` and ``writable_roots``):
writes confined to the workspace, network off. It does **not** hide reads:
a sandboxed command can still read ``.env`` or ``~/.ssh``, so there the
secrets rely on the hook layer.

The file is edited as text (the standard library reads TOML but does not
write it): the two keys are replaced where they are, or added; every other
line, comment included, is kept. The result is parsed again, and an edit
that does not read back as intended is refused, the file untouched.
"""

from __future__ import annotations

import re
import tomllib
from typing import Final

from trajgrade.errors import ConfigError

__all__ = ("CODEX_SANDBOX", "merged_codex_config")

#: The values trajgrade sets.
CODEX_SANDBOX: Final = {"sandbox_mode": "workspace-write", "network_access": False}
_TABLE: Final = "sandbox_workspace_write"
_HEADER: Final = re.compile(r"^\s*\[\s*([^\]]+?)\s*\]\s*(#.*)?$")


def _key(line: str) -> str | None:
    head = line.split("=", 1)[0].strip() if "=" in line else None
    return head.replace('"', "").replace(" ", "") if head else None


def merged_codex_config(text: str) -> str:
    """``text`` (a config.toml) with the sandbox keys set."""
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = f"not valid TOML ({exc}); fix the file, then run the command again"
        raise ConfigError(msg) from None
    lines = text.splitlines()
    table: str | None = None
    mode_at = access_at = header_at = None
    for i, line in enumerate(lines):
        header = _HEADER.match(line)
        if header:
            table = header.group(1).replace('"', "").replace(" ", "")
            if table == _TABLE:
                header_at = i
            continue
        key = _key(line)
        if table is None and key == "sandbox_mode":
            mode_at = i
        elif (table is None and key == f"{_TABLE}.network_access") or (
            table == _TABLE and key == "network_access"
        ):
            access_at = i
    mode_line = (
        'sandbox_mode = "workspace-write"  # set by trajgrade hook install --sandbox'
    )
    if access_at is not None:
        prefix = lines[access_at].split("=", 1)[0]
        lines[access_at] = f"{prefix.rstrip()} = false"
    elif header_at is not None:
        lines.insert(header_at + 1, "network_access = false")
    else:
        lines += ["", f"[{_TABLE}]", "network_access = false"]
    if mode_at is not None:
        lines[mode_at] = mode_line
    else:
        lines.insert(0, mode_line)
    out = "\n".join(lines).strip("\n") + "\n"
    try:
        got = tomllib.loads(out)
        ok = (
            got.get("sandbox_mode") == "workspace-write"
            and got.get(_TABLE, {}).get("network_access") is False
        )
    except (tomllib.TOMLDecodeError, AttributeError):
        ok = False
    if not ok:
        msg = (
            "could not set sandbox_mode and [sandbox_workspace_write] network_access "
            "in this file without changing other settings; set them by hand "
            '(sandbox_mode = "workspace-write", network_access = false), then run '
            "the command again"
        )
        raise ConfigError(msg)
    return out
