"""What a shell command does: :func:`analyze_command` -> :class:`ShellFacts`.

Built on the tree-sitter-bash walk of :mod:`trajgrade.graders.matching._shell`
(every program through wrappers, nested ``bash -c``, ``eval``, pipelines and
substitutions), which tells an observer (:mod:`.shell_observer`) of each
command node, each program start, each redirection and here-document. From
those come:

* the programs (:class:`~.facts.Run`): a glob or expansion in a program's
  name (``/usr/bin/cur?``, ``$CMD``) is an unknown program (``name`` None);
  capabilities from :mod:`.programs`, inline code's from :mod:`.inline_code`;
* the paths (:class:`~.facts.Touch`): each word read as a glob
  (:mod:`.shell_words`), its role from the program table (``cat`` reads,
  ``rm`` deletes, ``cp`` reads then writes, ``sh x`` runs x, ``grep -r d``
  reads ``d/**``), options whose value is a file (``curl -T f``, ``-o f``),
  redirections (``> f`` writes, ``< f`` reads), the files of sed and awk
  scripts, and the string literals of interpreters' inline code;
* URLs (``scheme://``, ``user@host:path`` for scp/rsync/ssh and
  ``host port`` / ``host:port`` for nc, socat, telnet), and whether the
  command could be read at all.

Paths are made absolute against ``cwd`` (lexically: ``..``, ``.``, ``//``);
after a ``cd`` a relative path is read against every directory it could be
relative to.
"""

from __future__ import annotations

import functools
from typing import Final

import msgspec

from trajgrade.graders.matching._shell import MAX_DEPTH, observe, parse_tree
from trajgrade.graders.protect.facts import Run, Touch
from trajgrade.graders.protect.inline_code import URL

__all__ = ("MAX_NESTED", "ShellFacts", "analyze_command")

#: Commands inside inline code (``os.system('...')``) read this deep.
MAX_NESTED: Final = 4


class ShellFacts(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    runs: tuple[Run, ...] = ()
    touches: tuple[Touch, ...] = ()
    urls: tuple[str, ...] = ()
    #: Why the command could not be read (a parse error, nesting too deep).
    unreadable: str | None = None


@functools.lru_cache(maxsize=256)
def analyze_command(command: str, cwd: str | None) -> ShellFacts:
    """What ``command``, run in ``cwd``, does (see the module docstring)."""
    return analyze_nested(command, cwd, 0)


def analyze_nested(command: str, cwd: str | None, nested: int) -> ShellFacts:
    """:func:`analyze_command` for a command found ``nested`` levels deep in
    inline code."""
    from trajgrade.graders.protect.shell_observer import Observer

    _, broken = parse_tree(command)
    seen = Observer(cwd, nested)
    found = observe(command, seen)
    if found.unknown and not any(r.name is None for r in seen.runs):
        # The walk met what it cannot read on: a script from stdin, a name
        # set up to run later. Its program is unknown.
        seen.runs.append(Run(name=None, argv=("<unknown>",)))
    for url in URL.findall(command):
        seen.urls.setdefault(url.rstrip(".,;"), None)
    unreadable = seen.unreadable
    if broken:
        unreadable = "the command could not be parsed as bash"
    elif seen.too_deep:
        unreadable = f"commands nested deeper than {MAX_DEPTH} levels"
    return ShellFacts(
        runs=tuple(seen.runs),
        touches=tuple(dict.fromkeys(seen.touches)),
        urls=tuple(seen.urls),
        unreadable=unreadable,
    )
