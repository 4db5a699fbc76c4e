"""Commands that run other commands, and how their options are read.

Tables for :mod:`._shell`: wrappers whose arguments are a command (``sudo``,
``env``, ``xargs``, ...), options whose value is a command line (``su -c``,
``mapfile -C``), and what a shell or a wrapper reads its script from.
"""

from __future__ import annotations

import posixpath
import shlex
from typing import Final, NamedTuple

__all__ = (
    "COMMAND_LOOKUP",
    "COMMAND_OPTS",
    "DECLARATIONS",
    "FIND_EXEC",
    "SHELLS",
    "VARIABLE_SETTERS",
    "WRAPPERS",
    "CommandOpts",
    "Wrapper",
    "after_options",
    "command_options",
    "env_split",
    "replacing",
    "runs_code",
    "starts_shell",
    "stdin_path",
    "xargs_replacement",
)

SHELLS: Final = frozenset(("sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash"))
#: Variables a shell runs as commands: a startup file read by every
#: non-interactive bash (BASH_ENV) or interactive sh (ENV), prompts that are
#: expanded (PS4 under `set -x`). ``BASH_FUNC_name%%`` imports a function.
_CODE_VARIABLES: Final = frozenset(
    ("BASH_ENV", "ENV", "PS0", "PS1", "PS2", "PS4", "PROMPT_COMMAND")
)
#: Builtins whose words are ``NAME=value`` assignments or variable names.
DECLARATIONS: Final = frozenset(("export", "declare", "typeset", "local", "readonly"))
#: Builtins that set a variable named by a word.
VARIABLE_SETTERS: Final = frozenset(
    ("read", "printf", "mapfile", "readarray", "getopts")
)


def runs_code(name: str) -> bool:
    """Whether setting variable ``name`` makes a shell run its value."""
    name = name.removesuffix("+")  # NAME+=value
    return name in _CODE_VARIABLES or name.startswith("BASH_FUNC_")


class Wrapper(NamedTuple):
    #: Options that take the next word (or an attached/``=`` value).
    value_opts: frozenset[str] = frozenset()
    #: Positional words before the command (``timeout``'s duration).
    positional: int = 0
    #: Skip ``NAME=value`` words (``env``).
    assignments: bool = False
    #: Options with which, given no command, it starts a shell reading
    #: stdin (``sudo -s``); ``"*"``: always (``chroot DIR``).
    shell: frozenset[str] = frozenset()
    #: Short options whose value, if any, is attached (``xargs -i{}``).
    attached: frozenset[str] = frozenset()


def _w(
    opts: str = "",
    positional: int = 0,
    *,
    assignments: bool = False,
    shell: str = "",
    attached: str = "",
) -> Wrapper:
    return Wrapper(
        frozenset(opts.split()),
        positional,
        assignments,
        frozenset(shell.split()),
        frozenset(attached.split()),
    )


WRAPPERS: Final = {
    "sudo": _w(
        "-u -g -h -p -C -D -r -t -U -T -R --user --group --host --prompt "
        "--close-from --chdir --role --type --other-user --command-timeout",
        assignments=True,
        shell="-s -i --shell --login",
    ),
    "doas": _w("-u -C", shell="-s"),
    "env": _w("-u -C --unset --chdir", assignments=True),
    "timeout": _w("-s -k --signal --kill-after", 1),
    "nice": _w("-n --adjustment"),
    "nohup": _w(),
    "setsid": _w(),
    "time": _w("-f -o --format --output"),
    "exec": _w("-a"),
    "builtin": _w(),
    "stdbuf": _w("-i -o -e --input --output --error"),
    "ionice": _w("-c -n -p -t --class --classdata"),
    "taskset": _w("", 1),
    "unbuffer": _w(),
    # `-d`/`--differences` take an attached value only; without -x the
    # command is run by `sh -c` (see _Acc.argv).
    "watch": _w("-n -q --interval --equexit", attached="-d"),
    # --replace, --max-lines and --eof take an attached value only.
    "xargs": _w(
        "-I -L -n -P -s -d -E -a --max-args --max-procs --delimiter "
        "--arg-file --max-chars --process-slot-var",
        attached="-e -i -l",
    ),
    "chroot": _w("--userspec --groups", 1, shell="*"),
    "flock": _w("-w -E --wait --timeout --conflict-exit-code", 1),  # flock FILE cmd
    "busybox": _w(),  # `busybox wget x`: the applet is the program
    "strace": _w("-e -o -p -s -u -E -a -b -I -O -S -X -P -U --output --env --user"),
    "ltrace": _w("-e -o -p -s -u -a -n -l -A -D -F -w --output"),
    "nsenter": _w("-t -S -G --target --setuid --setgid --wd", shell="*"),
    "unshare": _w(
        "-S -G -R -w --setuid --setgid --root --wd --propagation --setgroups "
        "--map-user --map-group",
        shell="*",
    ),
}


class CommandOpts(NamedTuple):
    #: The options whose value is a command line.
    opts: frozenset[str]
    #: Operands that may come before one (None: any; su and script permute
    #: their arguments, `flock FILE -c CMD`).
    operands: int | None
    #: Other options' values, skipped.
    value_opts: frozenset[str] = frozenset()
    #: Without one, it starts an interactive shell (reading stdin).
    shell: bool = False


_SU = frozenset(("-c", "--command", "--session-command"))
_MAPFILE = frozenset(("-d", "-n", "-O", "-s", "-u", "-c"))
_COMPGEN = frozenset(("-A", "-G", "-W", "-F", "-P", "-S", "-X", "-o"))
_CALLBACK = frozenset(("-C",))
#: Options whose value is a command line the program runs through a shell
#: (mapfile's and compgen's callbacks are evaluated like eval).
COMMAND_OPTS: Final = {
    "su": CommandOpts(_SU, None, shell=True),
    "runuser": CommandOpts(_SU, None, shell=True),
    "script": CommandOpts(frozenset(("-c", "--command")), None, shell=True),
    "flock": CommandOpts(
        frozenset(("-c", "--command")), 1, WRAPPERS["flock"].value_opts
    ),
    "mapfile": CommandOpts(_CALLBACK, None, _MAPFILE),
    "readarray": CommandOpts(_CALLBACK, None, _MAPFILE),
    "compgen": CommandOpts(_CALLBACK, None, _COMPGEN),
}
# `command -v x` / `-V` only look a name up: nothing runs.
COMMAND_LOOKUP: Final = frozenset(("-v", "-V"))
FIND_EXEC: Final = frozenset(("-exec", "-execdir", "-ok", "-okdir"))


def _span(word: str, value_opts: frozenset[str], attached: frozenset[str]) -> int:
    """How many words option ``word`` takes: 2 when its value is the next
    word (``-u root``, ``-xo pipefail``: the last letter of a cluster takes
    it), else 1 (a flag, ``-uroot``, ``--user=root``)."""
    if word.startswith("--"):
        return 2 if word in value_opts else 1
    for j in range(1, len(word)):
        letter = f"-{word[j]}"
        if letter in attached:
            return 1
        if letter in value_opts:
            return 1 if j + 1 < len(word) else 2
    return 1


def _find_option(
    words: list[str | None],
    opts: frozenset[str],
    operands: int | None,
    value_opts: frozenset[str],
) -> tuple[int, str | None, int] | None:
    """The first of ``opts`` in ``words``: (its index, its value, the index
    after it); the value is None when it is not static text.
    ``-c CMD``, ``-lc CMD`` (flags before it), ``-cCMD``, ``--command=CMD``;
    other options' values (``value_opts``) are skipped, and the search ends
    after ``operands`` operands."""
    i, seen = 0, 0
    while i < len(words):
        word = words[i]
        if word == "--":
            break
        if word is None or not word.startswith("-") or word == "-":
            seen += 1
            if operands is not None and seen > operands:
                break
            i += 1
            continue
        after = words[i + 1] if i + 1 < len(words) else None
        if word.startswith("--"):
            name, eq, value = word.partition("=")
            if name in opts:
                return (i, value, i + 1) if eq else (i, after, i + 2)
        else:
            for j in range(1, len(word)):
                letter = f"-{word[j]}"
                if letter in opts:  # -cCMD, -lc CMD
                    return (
                        (i, word[j + 1 :], i + 1)
                        if word[j + 1 :]
                        else (i, after, i + 2)
                    )
                if letter in value_opts:
                    break
        i += _span(word, value_opts, frozenset())
    return None


def command_options(words: list[str | None], spec: CommandOpts) -> list[str | None]:
    """Every value of ``spec``'s options in ``words`` (None: not static)."""
    found: list[str | None] = []
    start = 0
    while hit := _find_option(words[start:], spec.opts, spec.operands, spec.value_opts):
        found.append(hit[1])
        start += hit[2]
        if spec.operands is not None:
            break  # operands counted from the start; one value is enough
    return found


_ENV_S = frozenset(("-S", "--split-string"))


def env_split(words: list[str | None]) -> list[str | None] | None:
    """``env``'s arguments with each ``-S STRING`` split into the words it
    stands for (``env -S 'A=1 curl' x`` runs ``curl x``); a word with a
    ``$`` (env expands ``${VAR}``) is None; None: a string not readable."""
    value_opts = WRAPPERS["env"].value_opts
    for _ in range(8):
        hit = _find_option(words, _ENV_S, 0, value_opts)
        if hit is None:
            return words
        at, value, after = hit
        if value is None:
            return None
        try:
            split: list[str | None] = list(shlex.split(value))
        except ValueError:
            return None
        split = [None if w is not None and "$" in w else w for w in split]
        words = [*words[:at], *split, *words[after:]]
    return None


def after_options(words: list[str | None], w: Wrapper) -> list[str | None] | None:
    """The words after a wrapper's options and positionals (None:
    unreadable, or an assignment that makes a shell run code)."""
    i = 0
    while i < len(words):
        word = words[i]
        if word is None:
            return None
        if word == "--":
            i += 1
            break
        if w.assignments and "=" in word and not word.startswith("-"):
            if runs_code(word.split("=", 1)[0]):
                return None
            i += 1
            continue
        if not word.startswith("-") or word == "-":
            break
        i += _span(word, w.value_opts, w.attached)
    i += w.positional
    return words[i:] if i <= len(words) else []


def starts_shell(words: list[str | None], w: Wrapper) -> bool:
    """Whether a wrapper given no command starts a shell (reading stdin):
    ``sudo -s``, ``sudo -Ei``, ``chroot DIR``."""
    if "*" in w.shell:
        return True
    for word in words:
        if word is None or not word.startswith("-"):
            continue
        if word in w.shell or (
            not word.startswith("--") and any(f"-{c}" in w.shell for c in word[1:])
        ):
            return True
    return False


def xargs_replacement(words: list[str | None]) -> str | None:
    """The string ``xargs -I R`` / ``-iR`` / ``--replace[=R]`` replaces in
    its command's words (None: no replacement; ``""``: not known, so every
    word)."""
    xargs = WRAPPERS["xargs"]
    found: str | None = None
    i = 0
    while i < len(words):
        word = words[i]
        if word is None or word == "--" or not word.startswith("-") or word == "-":
            break
        after = words[i + 1] if i + 1 < len(words) else None
        if word.startswith("--replace"):
            found = word.partition("=")[2] or "{}"
        elif not word.startswith("--"):
            for j in range(1, len(word)):
                rest = word[j + 1 :]
                if word[j] == "I":
                    found = rest or (after if after is not None else "")
                    break
                if word[j] == "i":
                    found = rest or "{}"
                    break
                if f"-{word[j]}" in xargs.value_opts | xargs.attached:
                    break
        i += _span(word, xargs.value_opts, xargs.attached)
    return found


def replacing(words: list[str | None], text: str | None) -> list[str | None]:
    """``words`` with each one that holds ``text`` as None: what it becomes
    (a file name, a line of input) is not known."""
    if text is None:
        return words
    return [None if w is None or text in w else w for w in words]


def stdin_path(word: str) -> bool:
    """A script path that is the shell's stdin or an open descriptor:
    ``-``, ``/dev/stdin``, ``/dev/fd/N``, ``/proc/self/fd/N``."""
    if word == "-":
        return True
    p = posixpath.normpath(word) if word else word
    p = "/" + p.lstrip("/") if p.startswith("//") else p
    return (
        p == "/dev/stdin"
        or p.startswith("/dev/fd/")
        or (p.startswith("/proc/") and "/fd/" in p)
    )
