"""The installed guard's own integrity: the pinned policy and the host key.

**The pin.** ``hook install`` writes ``--pin blake2b:<hex>`` into the hook
command: the digest of the policy file's bytes. The bytes, not the parsed
config: the check needs no YAML parser on the cold path, and any edit at
all (a comment included) is a change the user must confirm by installing
again, which is what stops an agent that rewrote the policy. A hook whose
policy is missing, unreadable or changed denies every gate call, however
it runs, and compiles exactly the bytes it verified (no second read).

**The host key.** 32 random bytes in ``<state dir>/host.key`` (0600),
made by ``hook install``; the command carries only the key's id
(``--host-key ID``, a digest). The hook reads the key from that fixed path,
never from its arguments (the settings file that holds the command is
readable by the agent). Under ``--sandbox`` the state directory is in
Claude Code's ``denyRead`` and hooks run outside the sandbox, so a hook
started from the agent's shell cannot read the key: its call is not the
host's, and it changes no state. Without the sandbox any process of the
user can read the key; docs/hooks.md says what still holds then.
"""

from __future__ import annotations

import os
from typing import Final

from trajgrade._util.digest import blake2b

__all__ = (
    "HOST_KEY",
    "PinError",
    "ensure_host_key",
    "host_key_id",
    "pinned_bytes",
    "policy_digest",
)

#: The host key's file name in the state directory.
HOST_KEY: Final = "host.key"
_SCHEME: Final = "blake2b:"


class PinError(Exception):
    """The pinned policy cannot be used; the message says how to re-pin."""

    def __init__(self, path: str, problem: str, agent: str) -> None:
        super().__init__(
            f"the guard's policy {path} {problem} since the hook was installed; "
            f"every tool call is denied until you check it (`trajgrade check -c {path}`) "
            f"and install again to pin it: `trajgrade hook install {agent} -c {path}`"
        )


def digest_of(data: bytes) -> str:
    """``blake2b:<hex>`` of ``data``."""
    return _SCHEME + blake2b(data, digest_size=32).hexdigest()


def policy_digest(path: str) -> str:
    """The pin of the policy file at ``path`` (OSError when unreadable)."""
    with open(path, "rb") as f:
        return digest_of(f.read())


def pinned_bytes(path: str, pin: str, agent: str) -> bytes:
    """The policy's bytes when they match ``pin``; PinError otherwise."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise PinError(path, "is missing", agent) from None
    except OSError as exc:
        raise PinError(path, f"is unreadable ({exc.strerror})", agent) from None
    if digest_of(data) != pin:
        raise PinError(path, "has changed", agent)
    return data


def _key_id(key: bytes) -> str:
    return blake2b(key, digest_size=16, person=b"trajgrade-host").hexdigest()


def host_key_id(state_dir: str) -> str | None:
    """The id of the host key this process can read; None when it cannot."""
    try:
        with open(os.path.join(state_dir, HOST_KEY), "rb") as f:
            key = f.read(64)
    except OSError:
        return None
    return _key_id(key) if len(key) == 32 else None


def ensure_host_key(state_dir: str) -> str:
    """The id of the state directory's host key, made (0600) when missing."""
    from trajgrade.hooks.store import private_dirs

    found = host_key_id(state_dir)
    if found is not None:
        return found
    private_dirs(state_dir)
    path = os.path.join(state_dir, HOST_KEY)
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(os.urandom(32))
    os.replace(tmp, path)
    key_id = host_key_id(state_dir)
    assert key_id is not None
    return key_id
