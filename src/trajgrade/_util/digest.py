"""blake2b for ids and fingerprints, without loading OpenSSL.

``import hashlib`` loads OpenSSL's libcrypto (about 10 ms here), which a cold
``trajgrade hook`` process pays on the agent's critical path; blake2b is a
CPython builtin that needs none of it. Every digest trajgrade takes (verdict
ids, config fingerprints, file identities, state file names) is blake2b.
"""

from __future__ import annotations

try:
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter built without it
    from hashlib import blake2b

__all__ = ("blake2b",)
