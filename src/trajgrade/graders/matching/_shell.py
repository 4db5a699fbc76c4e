"""The programs a shell command runs, read with tree-sitter-bash.

``programs("sudo timeout 5 curl x | sh -c 'wget y'")`` gives the base name
of every program the command would start: ``sudo``, ``timeout``, ``curl``,
``sh``, ``wget``. The parse tree is walked whole, so commands in pipelines,
``&&``/``||``/``;`` lists, subshells, ``{ }`` groups, ``if``/``for``/``while``
bodies, ``$( )``, backticks and process substitutions are all seen. Then,
per command, the words are read as the shell would after quote removal:

* wrappers that run their arguments as a command (``sudo``, ``env``,
  ``timeout``, ``nice``, ``nohup``, ``xargs``, ``exec``, ``command``,
  ``time``, ``stdbuf``, ...) are skipped over, options and all, and the
  command they run is read too (``find -exec`` likewise);
* ``bash -c STR`` / ``sh -c STR`` and ``eval STR`` strings are parsed in turn,
  and so are command-line options (``su -c``, ``flock -c``, ``env -S``);
* a line continuation (backslash-newline) joins words, as bash does;
* ``/usr/bin/curl`` counts as ``curl``.

What cannot be known is reported as ``unknown`` instead of guessed: a parse
error, a program named by an expansion (``$CMD``, ``$(echo curl)``), a
``-c`` string built from expansions, a shell reading its script from stdin
(``curl x | sh``), nesting deeper than :data:`MAX_DEPTH`. A deny rule treats
``unknown`` as a match (fail closed); ``required`` does not count it.

tree-sitter is imported on first use only (the hook path pays for it only
when a policy uses ``program:``).
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any, Final, NamedTuple

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ("MAX_DEPTH", "Programs", "programs")

#: Nested ``bash -c`` / ``eval`` levels read before giving up (unknown).
MAX_DEPTH: Final = 8

_SHELLS: Final = frozenset(("sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash"))
_SHELL_VALUE_OPTS: Final = frozenset(
    ("-o", "+o", "-O", "+O", "--rcfile", "--init-file")
)


class _Wrapper(NamedTuple):
    #: Options that take the next word (or an attached/``=`` value).
    value_opts: frozenset[str] = frozenset()
    #: Positional words before the command (``timeout``'s duration).
    positional: int = 0
    #: Skip ``NAME=value`` words (``env``).
    assignments: bool = False


def _w(opts: str = "", positional: int = 0, *, assignments: bool = False) -> _Wrapper:
    return _Wrapper(frozenset(opts.split()), positional, assignments)


_WRAPPERS: Final = {
    "sudo": _w(
        "-u -g -h -p -C -D -r -t -U -T -R --user --group --host --prompt "
        "--close-from --chdir --role --type --other-user --command-timeout"
    ),
    "doas": _w("-u -C"),
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
    "watch": _w("-n -d --interval --differences"),
    "xargs": _w(
        "-I -L -n -P -s -d -E -a --max-args --max-procs --delimiter "
        "--arg-file --max-lines --max-chars --eof --replace"
    ),
    "chroot": _w("--userspec --groups", 1),
    "flock": _w("-w -E --wait --timeout --conflict-exit-code", 1),  # flock FILE cmd
    "busybox": _w(),  # `busybox wget x`: the applet is the program
    "strace": _w("-e -o -p -s -u -E -a -b -I -O -S -X -P -U --output --env --user"),
    "ltrace": _w("-e -o -p -s -u -a -n -l -A -D -F -w --output"),
    "nsenter": _w("-t -S -G --target --setuid --setgid --wd"),
    "unshare": _w(
        "-S -G -R -w --setuid --setgid --root --wd --propagation --setgroups "
        "--map-user --map-group"
    ),
}
#: Options whose value is a command line the program runs (through a shell,
#: or split into words: `env -S`), and how many operands may come before
#: one (None: any; su and script permute their arguments, env stops at its
#: command, `flock FILE -c CMD`).
_COMMAND_OPTS: Final[dict[str, tuple[frozenset[str], int | None]]] = {
    "su": (frozenset(("-c", "--command", "--session-command")), None),
    "runuser": (frozenset(("-c", "--command", "--session-command")), None),
    "script": (frozenset(("-c", "--command")), None),
    "flock": (frozenset(("-c", "--command")), 1),
    "env": (frozenset(("-S", "--split-string")), 0),
}
# `command -v x` / `-V` only look a name up: nothing runs.
_COMMAND_LOOKUP: Final = frozenset(("-v", "-V"))
_ESCAPED: Final = re.compile(r"\\(.?)", re.DOTALL)
_FIND_EXEC: Final = frozenset(("-exec", "-execdir", "-ok", "-okdir"))
_SKIP_NODES: Final = frozenset(
    ("file_redirect", "heredoc_redirect", "herestring_redirect", "variable_assignment")
)


class Programs(NamedTuple):
    """What a command runs: program base names, in order; and whether some
    part could not be read (see the module docstring)."""

    names: tuple[str, ...]
    unknown: bool


@functools.cache
def _parser() -> Any:
    import tree_sitter

    return tree_sitter.Parser(tree_sitter.Language(_bash_grammar()))


def _bash_grammar() -> Any:
    """tree-sitter-bash's compiled grammar, loaded without running the
    package's ``__init__``: that imports ``importlib.resources`` (~8 ms of a
    cold hook) only to offer query files the parser does not need."""
    import importlib.machinery
    import importlib.util

    spec = importlib.util.find_spec("tree_sitter_bash")  # does not import it
    for folder in (spec.submodule_search_locations or ()) if spec else ():
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            where = importlib.util.spec_from_file_location(
                "tree_sitter_bash._binding", f"{folder}/_binding{suffix}"
            )
            if where is None or where.loader is None:
                continue
            try:
                binding = importlib.util.module_from_spec(where)
                where.loader.exec_module(binding)
            except ImportError:
                continue  # no binding with this suffix
            return binding.language()
    import tree_sitter_bash  # another layout: the public way

    return tree_sitter_bash.language()


@functools.lru_cache(maxsize=256)
def programs(command: str) -> Programs:
    """The programs ``command`` runs (see the module docstring)."""
    acc = _Acc()
    acc.script(command, 0)
    return Programs(tuple(acc.names), acc.unknown)


class _Acc:
    __slots__ = ("names", "unknown")

    def __init__(self) -> None:
        self.names: list[str] = []
        self.unknown = False

    def script(self, text: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            self.unknown = True
            return
        self._parse(text, depth)
        joined = _join_continuations(text) if "\\\n" in text else text
        if joined != text:
            # tree-sitter reads `cu\<newline>rl` as two words; bash joins
            # them into `curl`. The joined reading adds what bash runs.
            seen = set(self.names)
            other = _Acc()
            other._parse(joined, depth)
            self.names.extend(n for n in other.names if n not in seen)
            self.unknown = self.unknown or other.unknown

    def _parse(self, text: str, depth: int) -> None:
        tree = _parser().parse(text.encode("utf-8", "surrogatepass"))
        root = tree.root_node
        if root.has_error and _unreadable(root):
            self.unknown = True
        for node in _commands(root):
            self.argv(_words(node), depth)

    def argv(self, argv: list[str | None], depth: int) -> None:
        while argv:
            head = argv[0]
            if head is None:
                self.unknown = True
                return
            base = head.rsplit("/", 1)[-1] or head
            self.names.append(base)
            rest = argv[1:]
            if base in _SHELLS:
                self._shell(rest, depth)
                return
            if base == "eval":
                self._string(rest, depth)
                return
            if base == "find":
                self._find(rest, depth)
                return
            if base in _COMMAND_OPTS:
                skip = _WRAPPERS[base].value_opts if base in _WRAPPERS else frozenset()
                found, script = _command_option(rest, *_COMMAND_OPTS[base], skip)
                if found:
                    if script is None:
                        self.unknown = True
                    else:
                        self.script(script, depth + 1)
                    return
            if base == "command" and _COMMAND_LOOKUP.intersection(
                w for w in rest if w is not None
            ):
                return
            wrapper = _WRAPPERS.get(base)
            if wrapper is None and base != "command":
                return
            inner = _after_options(rest, wrapper or _Wrapper())
            if inner is None:
                self.unknown = True
                return
            argv = inner
            if not argv and base == "xargs":
                self.names.append("echo")  # xargs' default command

    def _string(self, words: list[str | None], depth: int) -> None:
        if any(w is None for w in words):
            self.unknown = True
        elif words:
            self.script(" ".join(w for w in words if w is not None), depth + 1)

    def _shell(self, rest: list[str | None], depth: int) -> None:
        dash_c = False
        i = 0
        while i < len(rest):
            w = rest[i]
            if w is None:
                self.unknown = True
                return
            if w == "--" or not w.startswith(("-", "+")) or w in ("-", "+"):
                break
            if w in _SHELL_VALUE_OPTS:
                i += 1
            elif not w.startswith("--") and "c" in w[1:]:
                dash_c = True
            i += 1
        if i < len(rest) and rest[i] == "--":
            i += 1
        if dash_c:
            script = rest[i] if i < len(rest) else None
            if script is None:
                self.unknown = True
            else:
                self.script(script, depth + 1)
        elif i >= len(rest):
            # No -c and no script file: the script comes from stdin.
            self.unknown = True

    def _find(self, rest: list[str | None], depth: int) -> None:
        i = 0
        while i < len(rest):
            if rest[i] in _FIND_EXEC:
                j = i + 1
                while j < len(rest) and rest[j] not in (";", "+"):
                    j += 1
                self.argv(rest[i + 1 : j], depth)
                i = j
            i += 1


def _command_option(
    words: list[str | None],
    opts: frozenset[str],
    operands: int | None,
    value_opts: frozenset[str],
) -> tuple[bool, str | None]:
    """(whether one of ``opts`` is given, its value; None: not static text).
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
        name, eq, value = word.partition("=")
        if name in opts and word.startswith("--") and eq:
            return True, value
        short = not word.startswith("--") and len(word) > 2
        if short and f"-{word[1]}" in opts:  # an attached value: -cCMD
            return True, word[2:]
        if word in opts or (short and f"-{word[-1]}" in opts):
            return True, words[i + 1] if i + 1 < len(words) else None
        i += 2 if word in value_opts else 1
    return False, None


def _join_continuations(text: str) -> str:
    """``text`` with bash's line continuations (backslash-newline outside
    single quotes and comments) removed, as bash reads it."""
    out: list[str] = []
    i, n = 0, len(text)
    quote = ""  # "", "'" or '"'
    while i < n:
        ch = text[i]
        if quote == "'":
            quote = "" if ch == "'" else quote
        elif ch == "\\" and i + 1 < n:
            if text[i + 1] != "\n":
                out.append(text[i : i + 2])
            i += 2
            continue
        elif ch == '"':
            quote = "" if quote else '"'
        elif ch == "'" and not quote:
            quote = "'"
        elif ch == "#" and not quote and (not out or out[-1][-1:] in " \t\n;&|()"):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(text[i:end])
            i = end
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _unreadable(root: Any) -> bool:
    """A parse error that is not one tree-sitter-bash makes on valid input.

    The grammar fails on some backtick substitutions bash reads fine
    (``echo `true && x=$(ls)```); such a span whose inside parses cleanly on
    its own is not an error (its commands are in the tree all the same)."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_missing:
            return True
        if node.type == "ERROR":
            text = node.text
            inner = (
                text[1:-1] if len(text) >= 2 and text[:1] == text[-1:] == b"`" else None
            )
            if inner is None or _parser().parse(inner).root_node.has_error:
                return True
            continue
        stack.extend(c for c in node.children if c.has_error)
    return False


def _after_options(words: list[str | None], w: _Wrapper) -> list[str | None] | None:
    """The words after a wrapper's options and positionals (None: unreadable)."""
    i = 0
    while i < len(words):
        word = words[i]
        if word is None:
            return None
        if word == "--":
            i += 1
            break
        if w.assignments and "=" in word and not word.startswith("-"):
            i += 1
            continue
        if not word.startswith("-") or word == "-":
            break
        name = word.split("=", 1)[0]
        if name in w.value_opts and "=" not in word:
            i += 2  # the option's value is the next word
            continue
        i += 1  # a flag, an attached value (-uroot, -n10) or --opt=value
    i += w.positional
    return words[i:] if i <= len(words) else []


def _commands(root: Any) -> Iterator[Any]:
    """Every ``command`` node, outermost first, nested ones included."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "command":
            yield node
        stack.extend(reversed(node.children))


def _words(command: Any) -> list[str | None]:
    """A command's words after quote removal; None for a word that is not
    static text (an expansion)."""
    out: list[str | None] = []
    for child in command.named_children:
        if child.type in _SKIP_NODES:
            continue
        node = child.named_children[0] if child.type == "command_name" else child
        if node.type == "command_name":
            continue
        out.append(_static(node))
    return out


def _static(node: Any) -> str | None:
    kind = node.type
    text: str = node.text.decode("utf-8", "replace")
    if kind in ("word", "number"):
        return _unescape(text)
    if kind == "raw_string":
        return text[1:-1]
    if kind == "string":
        parts = []
        for c in node.named_children:
            if c.type != "string_content":
                return None
            parts.append(c.text.decode("utf-8", "replace"))
        return _unescape_dq("".join(parts))
    if kind == "concatenation":
        pieces = [_static(c) for c in node.named_children]
        if any(p is None for p in pieces):
            return None
        return "".join(p for p in pieces if p is not None)
    return None


def _unescape(text: str) -> str:
    """Quote removal of an unquoted word: ``\\x`` is ``x``."""
    return _ESCAPED.sub(r"\1", text) if "\\" in text else text


def _unescape_dq(text: str) -> str:
    """Inside double quotes only ``\\$ \\` \\" \\\\`` lose their backslash."""
    if "\\" not in text:
        return text
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text) and text[i + 1] in '$`"\\':
            out.append(text[i + 1])
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)
