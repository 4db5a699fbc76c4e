"""The policy pinned at install: ``hook install`` writes ``--pin DIGEST``.

A hook called with a changed, missing or unreadable policy denies every call
and says how to re-install: a replacement (a file the agent wrote, a test
that rewrote it) is never adopted silently, and a broken one never fails
open. Only the file's bytes count: a comment changed is a changed policy.
"""

from __future__ import annotations

__all__ = ("PinMismatch", "check_pin", "policy_digest")


class PinMismatch(Exception):
    """The policy is not the one the hook was installed with."""


def policy_digest(path: str) -> str:
    """``blake2b:<hex>`` of the policy file's bytes (what ``--pin`` holds)."""
    from trajgrade._util.digest import blake2b

    with open(path, "rb") as f:
        return "blake2b:" + blake2b(f.read(), digest_size=16).hexdigest()


def check_pin(path: str | None, pin: str) -> None:
    """Refuse a changed, missing or unreadable pinned policy: a replacement is
    never adopted silently and a broken one never fails open."""
    fix = "if the change is yours, re-install the hook (`trajgrade hook install AGENT -c POLICY`) to pin the new policy"
    try:
        digest = policy_digest(path or "")
    except OSError as exc:
        msg = f"the guard's policy {path} cannot be read ({exc.strerror or exc}); every call is denied; {fix}"
        raise PinMismatch(msg) from None
    if digest != pin:
        msg = f"the guard's policy {path} changed since the hook was installed; every call is denied; {fix}"
        raise PinMismatch(msg)
