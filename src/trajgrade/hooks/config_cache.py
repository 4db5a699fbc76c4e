"""The decoded policy, cached between hook invocations.

A cold hook process pays for every import on the agent's critical path;
parsing the YAML policy (PyYAML's import alone is ~20 ms here) is the one
piece that gives the same answer every time. The first invocation that
reads a policy without problems stores its decoded form (a
:class:`~trajgrade.config.model.SuiteConfig`, as msgpack) under the state
directory, keyed by the digest of the policy's bytes, its real path (the
base of its relative paths) and trajgrade's version; later invocations
decode that and compile it, without importing PyYAML. Any change to the
bytes gives another key: a cached compile never outlives an edit, even one
that keeps the size and resets the modification time (``touch -d``).
Reading the whole file and hashing it costs microseconds. A cache file
that cannot be read is ignored and rewritten; a policy with problems is never
cached, so its errors keep being reported with their lines.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import msgspec

from trajgrade._util.digest import blake2b

if TYPE_CHECKING:
    from trajgrade.config.model import Suite
    from trajgrade.graders import BuildContext

__all__ = ("load_suite_cached",)


def load_suite_cached(
    path: str, state_dir: str, context: BuildContext, *, data: bytes | None = None
) -> Suite:
    """``load_suite(path)``, with the decoded config cached under ``state_dir``.

    ``data``: the policy's bytes, already read (and verified against the
    pin): compiled as they are, the file is not read again.
    """
    from trajgrade._version import __version__
    from trajgrade.config.compile import compile_suite
    from trajgrade.config.decode import decode_config
    from trajgrade.config.model import SuiteConfig

    real = os.path.realpath(path)
    if data is None:
        try:
            with open(real, "rb") as f:
                data = f.read()
        except OSError:
            return _load(path, context)  # let the loader report it, located
    content = blake2b(data, digest_size=32).hexdigest()
    key = f"{real}\0{content}\0{__version__}".encode()
    name = blake2b(key, digest_size=12).hexdigest()
    cache = os.path.join(state_dir, "config-cache", f"{name}.msgpack")
    try:
        with open(cache, "rb") as f:
            config = msgspec.msgpack.decode(f.read(), type=SuiteConfig)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        config = None
    if config is not None:
        from trajgrade.graders.matching._match import deferred_compiles

        if context.base_dir is None:
            context.base_dir = config.base_dir
        # Cached only after it compiled cleanly at this version: its regexes
        # are compiled when a call first reaches them, not all up front.
        with deferred_compiles():
            return compile_suite(config, context=context)
    config = decode_config(
        data,
        name=path,
        json=path.endswith(".json"),
        base_dir=os.path.dirname(os.path.abspath(path)),
    )
    if context.base_dir is None:
        context.base_dir = config.base_dir
    suite = compile_suite(config, context=context)
    if not config.problems:
        _store(cache, msgspec.structs.replace(config, lines={}))
    return suite


def _load(path: str, context: BuildContext) -> Suite:
    from trajgrade.config.compile import load_suite

    return load_suite(path, context=context)


def _store(cache: str, config: object) -> None:
    """Write atomically; a cache that cannot be written is only a slower start."""
    from trajgrade.hooks.store import private_dirs

    try:
        private_dirs(os.path.dirname(cache))
        tmp = f"{cache}.{os.getpid()}.tmp"
        # Owner-only like the session states: whoever can write it decides
        # the policy every later invocation enforces.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(msgspec.msgpack.encode(config))
        os.replace(tmp, cache)
    except OSError:
        pass
