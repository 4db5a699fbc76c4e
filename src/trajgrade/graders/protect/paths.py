"""Path rules: does a touch name a path a ``protect:`` glob protects?

:class:`PathRules` compiles the globs of one list (``secrets``,
``read_only``) with their exceptions (``not_secrets``). A glob is relative
to the project -- the call's ``cwd`` -- unless it starts with ``~/`` (the
guard's home) or ``/``; without a cwd a relative glob may end any path
(``.env`` is ``**/.env``), and without a home ``~/.ssh/**`` is
``**/.ssh/**``: a guard that does not know where it is errs toward a match.

A touch matches

1. lexically: its normalised path (``sub/../.env``, ``./.env`` and
   ``/repo/.env`` are one path) matches a glob; a pattern touch (``.e*``)
   matches when some path it could name also matches the glob
   (:meth:`.globs.Glob.intersects`);
2. with a :class:`~.facts.World` (guard modes): when its real path or its
   (device, inode) is that of an existing file a glob names -- a symlink
   (``ln -s .env notes.txt``), a hard link, ``/proc/self/cwd/.env``, a
   directory link. A pattern touch then matches only when a protected file
   that exists matches it, or a file it names is one: the glob is matched
   against the directory, which is only possible when it can be read (if
   not, the lexical answer stands).

An exception exempts a touch only when the file itself is exempt: its
path as named and its real path both match an exception, and it is not a
hard link of a protected file. A pattern touch is never exempt (``.env*``
names ``.env`` as well as ``.env.example``) -- unless, with a World, every
protected file it could name is.
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING, NamedTuple

from trajgrade.graders.protect.aliases import ANY_PATH, UNKNOWABLE, unalias
from trajgrade.graders.protect.globs import Glob, escape

if TYPE_CHECKING:
    from collections.abc import Sequence

    from trajgrade.graders.protect.facts import Touch, World

__all__ = ("PathRules", "anchor_glob", "touch_glob")

#: Anchorings kept per rule set ((cwd, home) pairs; a session has one).
_ANCHORINGS_MAX = 16


class _Rule(NamedTuple):
    label: str  # the glob as the policy writes it (for the evidence)
    text: str  # anchored at the cwd and home
    glob: Glob


class _Compiled(NamedTuple):
    rules: tuple[_Rule, ...]
    exceptions: tuple[Glob, ...]


class _Protected(NamedTuple):
    """The protected files that exist now, as the World has them."""

    by_inode: dict[tuple[int, int], str]
    by_real: dict[str, str]
    named: list[tuple[str, str, str]]  # (path as expanded, real path, label)
    #: Some glob's directory could not be read: its files are unknown.
    partial: bool


def anchor_glob(glob: str, cwd: str | None, home: str | None) -> str:
    """A policy glob as an absolute glob (or a ``**/``-led one when the
    directory it is relative to is not known)."""
    if glob.startswith("~/") or glob == "~":
        rest = glob[2:]
        text = posixpath.join(home, rest) if home else "**/" + rest
    elif glob.startswith("/"):
        text = glob
    else:
        text = posixpath.join(cwd, glob) if cwd else "**/" + glob
    return _norm(text)


def _norm(text: str) -> str:
    norm = posixpath.normpath(text)
    return "/" + norm.lstrip("/") if norm.startswith("//") else norm


def touch_glob(touch: Touch, cwd: str | None, home: str | None) -> tuple[str, bool]:
    """(the touch's path, absolute where it can be, whether it is a glob).
    A literal path is returned as it is, a pattern as a glob."""
    path = touch.path
    pattern = touch.pattern
    if path.startswith("~/") or path == "~":
        if home is None:
            rest = path[2:]
            return "**/" + (rest if pattern else escape(rest)), True
        path = posixpath.join(home, path[2:])
    if path.startswith("/"):
        path = unalias(_norm(path), cwd)
        if path == UNKNOWABLE:
            return ANY_PATH, True
    if not path.startswith("/"):
        if cwd is None:
            parts = _norm(path).split("/")
            while parts and parts[0] in ("..", "."):
                del parts[0]  # `../.env`: some directory's .env
            rest = "/".join(parts)
            return "**/" + (rest if pattern else escape(rest)), True
        path = posixpath.join(cwd, path)
    return _norm(path), pattern


class PathRules:
    """One list of protect globs, with its exceptions, compiled."""

    __slots__ = ("_anchorings", "exceptions", "globs")

    def __init__(self, globs: Sequence[str], *, exceptions: Sequence[str] = ()) -> None:
        self.globs = tuple(globs)
        self.exceptions = tuple(exceptions)
        self._anchorings: dict[tuple[str | None, str | None], _Compiled] = {}

    def _compiled(self, cwd: str | None, home: str | None) -> _Compiled:
        got = self._anchorings.get((cwd, home))
        if got is None:
            rules = []
            for glob in self.globs:
                text = anchor_glob(glob, cwd, home)
                rules.append(_Rule(glob, text, Glob(text)))
            exceptions = tuple(Glob(anchor_glob(e, cwd, home)) for e in self.exceptions)
            got = _Compiled(tuple(rules), exceptions)
            if len(self._anchorings) >= _ANCHORINGS_MAX:
                self._anchorings.clear()
            self._anchorings[cwd, home] = got
        return got

    def matches(
        self,
        touch: Touch,
        *,
        cwd: str | None,
        home: str | None,
        world: World | None = None,
    ) -> str | None:
        """The glob (as the policy writes it) that ``touch`` names, or None."""
        compiled = self._compiled(cwd, home)
        text, pattern = touch_glob(touch, cwd, home)
        if pattern:
            hit = _pattern_hit(compiled, Glob(text))
            if world is None:
                return hit
            return _pattern_by_world(compiled, text, hit, cwd, world)
        hit = _literal_hit(compiled, text, touch.real)
        if world is None or hit is not None:
            return hit
        return _literal_by_world(compiled, touch, text, cwd, world)


def _exempt(compiled: _Compiled, *paths: str) -> bool:
    return bool(compiled.exceptions) and all(
        any(e.match(p) for e in compiled.exceptions) for p in paths
    )


def _literal_hit(compiled: _Compiled, path: str, real: str | None) -> str | None:
    readings = (path,) if real is None or real == path else (path, real)
    for reading in readings:
        for rule in compiled.rules:
            if rule.glob.match(reading) and not _exempt(compiled, *readings):
                return rule.label
    return None


def _pattern_hit(compiled: _Compiled, glob: Glob) -> str | None:
    for rule in compiled.rules:
        if rule.glob.intersects(glob):
            return rule.label
    return None


def _protected(compiled: _Compiled, cwd: str | None, world: World) -> _Protected:
    found = _Protected({}, {}, [], partial=False)
    partial = False
    for rule in compiled.rules:
        paths = world.expand(rule.text, cwd)
        if paths is None:
            partial = True
            continue
        for path in paths:
            where = world.find(path, cwd)
            if where is None or _exempt(compiled, path, where.real):
                continue
            found.by_inode.setdefault(where.inode, rule.label)
            found.by_real.setdefault(where.real, rule.label)
            found.named.append((path, where.real, rule.label))
    return found._replace(partial=partial)


def _literal_by_world(
    compiled: _Compiled, touch: Touch, path: str, cwd: str | None, world: World
) -> str | None:
    real, inode = touch.real, touch.inode
    if real is None or inode is None:
        where = world.find(path, cwd)
        if where is None:
            return None
        real, inode = where.real, where.inode
        hit = _literal_hit(compiled, path, real)
        if hit is not None:
            return hit
    protected = _protected(compiled, cwd, world)
    return protected.by_inode.get(inode) or protected.by_real.get(real)


def _pattern_by_world(
    compiled: _Compiled, text: str, lexical: str | None, cwd: str | None, world: World
) -> str | None:
    protected = _protected(compiled, cwd, world)
    glob = Glob(text)
    for path, real, label in protected.named:
        if glob.match(path) or glob.match(real):
            return label
    if not text.startswith("**") and text != ANY_PATH:
        for path in world.expand(text, cwd) or ():
            where = world.find(path, cwd)
            if where is None:
                continue
            owner = protected.by_inode.get(where.inode) or protected.by_real.get(
                where.real
            )
            if owner is not None:
                return owner
    # A directory that could not be read hides what the pattern names.
    return lexical if protected.partial else None
