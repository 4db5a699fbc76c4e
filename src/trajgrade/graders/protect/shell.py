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

from trajgrade.graders.protect.shell_observer import (
    MAX_NESTED,
    ShellFacts,
    analyze_nested,
)

__all__ = ("MAX_NESTED", "ShellFacts", "analyze_command")


@functools.lru_cache(maxsize=256)
def analyze_command(command: str, cwd: str | None) -> ShellFacts:
    """What ``command``, run in ``cwd``, does (see the module docstring)."""
    return analyze_nested(command, cwd, 0)
