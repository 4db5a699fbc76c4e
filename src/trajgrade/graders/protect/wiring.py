"""The ``protect`` grader's seams to its collaborators, in one place.

The decision (:mod:`.decide`) is a pure function of a call's facts. The
facts come from the analysis (``analysis.analyze``), path rules from
``paths.PathRules``, secret values from ``secret_values.SecretValues``:
each is imported where it is first used, so this module is the only one
that names them.
"""

from __future__ import annotations

import importlib
import posixpath
from typing import TYPE_CHECKING, Any, Final

from trajgrade._util.digest import blake2b
from trajgrade.graders.protect.facts import CallFacts, Touch

if TYPE_CHECKING:
    from collections.abc import Sequence

    from trajgrade.events import ToolCall
    from trajgrade.graders.protect.decide import HoldsSecretValues
    from trajgrade.graders.protect.facts import World
    from trajgrade.graders.protect.policy import PathMatcher

__all__ = ("SecretFiles", "facts_of", "path_rules")

#: Secret files whose values are recognised (the first found, per decision).
SECRET_FILES_MAX: Final = 64
#: Bytes of one secret file that are read (a larger one is not a .env).
SECRET_BYTES_MAX: Final = 1 << 20


def _collaborator(module: str, name: str) -> Any:
    """``name`` from the sibling ``module``, imported on first use (by name:
    this module is the one seam, and the import costs nothing until then)."""
    return getattr(importlib.import_module(f"trajgrade.graders.protect.{module}"), name)


def facts_of(call: ToolCall, *, cwd: str | None, world: World | None) -> CallFacts:
    """What ``call`` does; a call the analysis fails on is unreadable (a
    fail-closed guard then denies it)."""
    analyze = _collaborator("analysis", "analyze")
    try:
        facts: CallFacts = analyze(call, cwd=cwd, world=world)
        return facts
    except RecursionError:
        why = "nested too deep to read"
    except Exception as exc:  # an analysis bug must not let the call through
        why = f"the analysis failed ({type(exc).__name__}: {exc}); please report it"
    return CallFacts(tool=call.name, kind=None, unreadable=why)


def path_rules(
    globs: Sequence[str], *, exceptions: Sequence[str] = ()
) -> PathMatcher | None:
    """``globs`` compiled, with the ``exceptions`` they apply themselves (by
    the file, not its name: a link named like an exception is no
    exception); None for none."""
    if not globs:
        return None
    rules: PathMatcher = _collaborator("paths", "PathRules")(
        tuple(globs), exceptions=tuple(exceptions)
    )
    return rules


class SecretFiles:
    """The values of the policy's secret files, read through the World at
    decision time. Only what ``SecretValues`` keeps (digests) is cached, per
    file, by (inode, mtime, size) when the World says them, else by a digest
    of the bytes; never in the trace state."""

    __slots__ = ("_cache", "_globs", "_home", "_not_secrets", "_world")

    def __init__(
        self,
        globs: Sequence[str],
        *,
        world: World,
        not_secrets: PathMatcher | None,
        home: str | None,
    ) -> None:
        self._globs = tuple(globs)
        self._world = world
        self._not_secrets = not_secrets
        self._home = home
        self._cache: dict[str, tuple[object, HoldsSecretValues]] = {}

    def values(self, cwd: str | None) -> list[tuple[str, HoldsSecretValues]]:
        """(file, its values) for each secret file that exists now."""
        out: list[tuple[str, HoldsSecretValues]] = []
        for path in self._files(cwd):
            held = self._of(path, cwd)
            if held is not None:
                out.append((path, held))
        return out

    def _files(self, cwd: str | None) -> list[str]:
        seen: dict[str, None] = {}
        for glob in self._globs:
            pattern = glob
            if glob.startswith("~/"):
                if self._home is None:
                    continue
                pattern = posixpath.join(self._home, glob[2:])
            for path in self._world.expand(pattern, cwd) or ():
                if len(seen) >= SECRET_FILES_MAX:
                    return list(seen)
                if not self._exempt(path, cwd):
                    seen[path] = None
        return list(seen)

    def _exempt(self, path: str, cwd: str | None) -> bool:
        rules = self._not_secrets
        if rules is None:
            return False
        touch = Touch(path=path, mode="read")
        return (
            rules.matches(touch, cwd=cwd, home=self._home, world=self._world)
            is not None
        )

    def _of(self, path: str, cwd: str | None) -> HoldsSecretValues | None:
        world = self._world
        found = world.find(path, cwd)
        if found is None:
            return None
        stamp: object = None
        if found.mtime_ns is not None and found.size is not None:
            stamp = (found.inode, found.mtime_ns, found.size)
            cached = self._cache.get(found.real)
            if cached is not None and cached[0] == stamp:
                return cached[1]
        data = world.read_secret(found.real)
        if data is None:
            return None
        data = data[:SECRET_BYTES_MAX]
        if stamp is None:
            stamp = blake2b(data, digest_size=16).digest()
            cached = self._cache.get(found.real)
            if cached is not None and cached[0] == stamp:
                return cached[1]
        held: HoldsSecretValues = _collaborator("secret_values", "SecretValues")(data)
        if len(self._cache) >= SECRET_FILES_MAX * 4:
            self._cache.clear()
        self._cache[found.real] = (stamp, held)
        return held
