"""What a shell command does: :func:`analyze_command` -> :class:`ShellFacts`.

Built on the tree-sitter-bash walk of :mod:`trajgrade.graders.matching._shell`
(every program through wrappers, nested ``bash -c``, ``eval``, pipelines and
substitutions), which tells this module's observer of each command node,
each program start and each redirection. From those come:

* the programs (:class:`~.facts.Run`): a glob or expansion in a program's
  name (``/usr/bin/cur?``, ``$CMD``) is an unknown program (``name`` None);
  capabilities from :mod:`.programs`;
* the paths (:class:`~.facts.Touch`): each word read as a glob
  (:mod:`.shell_words`), its role from the program's table entry (``cat``
  reads, ``rm`` deletes, ``cp`` reads then writes, ``sh x`` runs x), the
  file options of network clients (``curl -d @f``, ``-T f``, ``-o f``),
  redirections (``> f`` writes, ``< f`` reads), and the string literals of
  interpreters' inline code (``python3 -c "open('.e'+'nv')"``: pieces
  joined by an operator become one pattern, ``.e*nv``);
* URLs, and whether the command could be read at all.
"""

from __future__ import annotations

import functools
import posixpath
import re
from typing import Any, Final

import msgspec

from trajgrade.graders.matching._shell import observe, parse_tree
from trajgrade.graders.protect.facts import Run, Touch
from trajgrade.graders.protect.programs import (
    capabilities_of,
    interpreter_flags,
    role_of,
)
from trajgrade.graders.protect.shell_words import GlobWord, glob_word, glob_words

__all__ = ("ShellFacts", "analyze_command", "code_facts")

_URL: Final = re.compile(r"\b(?:https?|ftp|wss?)://[^\s\"'<>()\[\]{}`]+", re.IGNORECASE)
_LITERAL: Final = re.compile(r"""(['"])((?:\\.|(?!\1).)*?)\1""")
#: Pieces of a string built in code: 'a' + 'b', "a" . "b", 'a' 'b'.
_JOINED: Final = re.compile(r"""(?:(['"])(?:\\.|(?!\1).)*?\1\s*(?:\+|\.|)\s*){2,}""")
#: ''.join(['a', 'b']), join("", "a", "b"), [..].join('').
_JOIN_LIST: Final = re.compile(r"join\s*\(\s*\[([^\]]*)\]|\[([^\]]*)\]\s*\.\s*join")
#: Strings made from what no literal shows: character codes, escapes,
#: decoders, reversal. Such code could name any path.
_OBSCURED: Final = re.compile(
    r"chr\s*\(|fromCharCode|\\x[0-9a-fA-F]{2}|\\[0-7]{3}|b64decode|atob\(|"
    r"decode\(|unhexlify|fromhex|\[::-1\]|reverse\(|rot13|pack\(|"
    r"glob\(|listdir|scandir|readdir|walk\(|os\.environ|getenv|ENV\[|process\.env"
)
_NETWORK_API: Final = re.compile(
    r"urlopen|urllib|requests\.|http\.client|httpx|aiohttp|socket|"
    r"fetch\(|XMLHttpRequest|https?\.(?:get|request)|net\.connect|"
    r"LWP|HTTP::|IO::Socket|Net::|curl_|fsockopen|file_get_contents\(\s*['\"]https?|"
    r"TCPSocket|open-uri|Net::HTTP|/dev/tcp/",
)
_RUN_API: Final = re.compile(
    r"\b(?:system|exec[lvpe]*|popen|spawn|subprocess|os\.system|child_process|"
    r"eval|passthru|shell_exec|proc_open|Kernel\.)\b|`"
)
#: Network clients' options whose next word (or ``=value``) is a file.
_FILE_OPTIONS: Final[dict[str, dict[str, str]]] = {
    "curl": {
        "-T": "read", "--upload-file": "read", "-K": "read", "--config": "read",
        "-o": "write", "--output": "write", "-c": "write", "--cookie-jar": "write",
        "-b": "read", "--cookie": "read", "-E": "read", "--cert": "read",
        "--key": "read",
    },
    "wget": {
        "-i": "read", "--input-file": "read", "--post-file": "read",
        "--body-file": "read", "-O": "write", "--output-document": "write",
        "-o": "write", "-a": "write", "-P": "write",
    },
    "ssh": {"-i": "read", "-F": "read"},
    "scp": {"-i": "read", "-F": "read"},
    "git": {"-C": "read"},
}  # fmt: skip
_REDIRECT_WRITE: Final = (">", ">>", "&>", "&>>", ">|", "<>")
#: Programs that read whole trees, and the options that make them do it
#: ("" : always). Listing names (ls -R, find, tree) reads no file's content.
_RECURSIVE: Final[dict[str, str]] = {
    "rg": "", "ag": "", "ack": "",
    "grep": "rR", "egrep": "rR", "fgrep": "rR", "diff": "r", "cp": "rRa",
    "rsync": "ra", "scp": "r", "zip": "r", "tar": "c", "bsdtar": "c",
}  # fmt: skip
#: Searchers whose first operand is the pattern, not a file.
_SEARCHERS: Final = frozenset(("grep", "egrep", "fgrep", "rg", "ag", "ack"))


class ShellFacts(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    runs: tuple[Run, ...] = ()
    touches: tuple[Touch, ...] = ()
    urls: tuple[str, ...] = ()
    unreadable: str | None = None


@functools.lru_cache(maxsize=256)
def analyze_command(command: str, cwd: str | None) -> ShellFacts:
    """What ``command``, run in ``cwd``, does (see the module docstring)."""
    _, broken = parse_tree(command)
    seen = _Observer(cwd)
    found = observe(command, seen)
    if found.unknown and not any(r.name is None for r in seen.runs):
        # The walk met what it cannot read on: a script from stdin, a name
        # set up to run later. Its program is unknown.
        seen.runs.append(Run(name=None, argv=("<unknown>",)))
    for url in _URL.findall(command):
        seen.urls.setdefault(url.rstrip(".,;"), None)
    return ShellFacts(
        runs=tuple(seen.runs),
        touches=tuple(seen.touches),
        urls=tuple(seen.urls),
        unreadable="the command could not be parsed as bash" if broken else None,
    )


def code_facts(code: str, cwd: str | None) -> tuple[list[Touch], frozenset[str]]:
    """The paths inline code names (string literals; pieces joined become
    one pattern) and the capabilities its APIs show (network, run-code)."""
    touches: list[Touch] = []
    joined = [m.group(0) for m in _JOINED.finditer(code)]
    joined += [m.group(1) or m.group(2) or "" for m in _JOIN_LIST.finditer(code)]
    if _OBSCURED.search(code):
        touches.append(Touch(path="*", mode="read", pattern=True))
    for text in joined:
        pieces = [p for _, p in _LITERAL.findall(text)]
        if len(pieces) > 1:
            glob = "*".join(pieces)
            touches.append(Touch(path=_absolute(glob, cwd), mode="read", pattern=True))
    for _, literal in _LITERAL.findall(code):
        if _pathlike(literal):
            touches.append(Touch(path=_absolute(literal, cwd), mode="read"))
    caps = {"run-code"}
    if _NETWORK_API.search(code) or _URL.search(code):
        caps.add("network")
    return touches, frozenset(caps)


def _pathlike(text: str) -> bool:
    return (
        0 < len(text) < 4096
        and not text.isspace()
        and "\n" not in text
        and ("/" in text or "." in text or text.startswith("~"))
        and "://" not in text
    )


def _absolute(path: str, cwd: str | None) -> str:
    if path.startswith(("~", "/")) or not cwd:
        return posixpath.normpath(path) if path not in ("", "~") else path
    return posixpath.normpath(posixpath.join(cwd, path))


class _Observer:
    """Collects runs and touches while the shell walk goes on."""

    def __init__(self, cwd: str | None) -> None:
        self.cwd = cwd
        self.runs: list[Run] = []
        self.touches: list[Touch] = []
        self.urls: dict[str, None] = {}
        self._globs: list[list[GlobWord]] = []

    # ---- what the walk tells
    def node(self, node: Any, depth: int) -> None:
        if node.type == "command":
            self._globs = glob_words(node)
        elif node.type == "file_redirect":
            self._redirect(node)

    def run(self, head: str | None, rest: list[str | None]) -> None:
        globs = self._globs[len(self._globs) - len(rest) :] if rest else []
        words = [
            w if w is not None else (g[0].text if i < len(globs) and g else "*")
            for i, (w, g) in enumerate(
                zip(rest, globs + [[]] * len(rest), strict=False)
            )
        ]
        name = None if head is None or _is_glob(head) else head.rsplit("/", 1)[-1]
        argv = (head or "*", *words)
        caps = capabilities_of(name, argv) if name is not None else None
        extra: frozenset[str] = frozenset()
        if name is not None:
            extra = self._operands(name, rest, globs)
        self.runs.append(
            Run(name=name, argv=argv, capabilities=(caps or frozenset()) | extra)
        )
        for word in words:
            for url in _URL.findall(word):
                self.urls.setdefault(url, None)

    # ---- paths
    def _touch(self, glob: GlobWord, mode: str) -> None:
        if not glob.text or glob.text == "-":
            return
        self.touches.append(
            Touch(path=_absolute(glob.text, self.cwd), mode=mode, pattern=glob.pattern)  # type: ignore[arg-type]
        )

    def _redirect(self, node: Any) -> None:
        op = ""
        dest = None
        for child in node.children:
            if not child.is_named:
                op += child.text.decode("utf-8", "replace")
            elif child.type != "file_descriptor":
                dest = child
        if dest is None or op.endswith("&"):
            return  # 2>&1: a descriptor, not a file
        mode = "write" if op.lstrip("0123456789") in _REDIRECT_WRITE else "read"
        for glob in glob_word(dest):
            self._touch(glob, mode)

    def _operands(
        self, name: str, rest: list[str | None], globs: list[list[GlobWord]]
    ) -> frozenset[str]:
        """Touches of ``name``'s words; capabilities its inline code adds."""
        role = role_of(name)
        code_flags = interpreter_flags(name)
        options = _FILE_OPTIONS.get(name, {})
        operands: list[list[GlobWord]] = []
        extra: set[str] = set()
        i = 0
        while i < len(rest):
            word = rest[i]
            alts = globs[i] if i < len(globs) else [GlobWord("*", True)]
            if word is not None and word in code_flags and i + 1 < len(rest):
                code = rest[i + 1]
                if code is None:
                    self._touch(GlobWord("*", True), "read")
                    extra |= {"run-code", "network"}
                else:
                    touches, caps = code_facts(code, self.cwd)
                    self.touches.extend(touches)
                    extra |= caps
                return frozenset(extra)  # the rest are the code's arguments
            if word is not None and word.startswith("-") and word != "-":
                key, eq, value = word.partition("=")
                mode = options.get(key)
                if mode and eq:
                    self._touch(GlobWord(value, False), mode)
                elif mode and i + 1 < len(rest):
                    for alt in globs[i + 1] if i + 1 < len(globs) else []:
                        self._touch(alt, mode)
                    i += 1
                i += 1
                continue
            if word is not None and name == "dd" and word[:3] in ("if=", "of="):
                self._touch(
                    GlobWord(word[3:], False), "read" if word[0] == "i" else "write"
                )
            elif (
                word is not None
                and word.startswith("@")
                and name in ("curl", "http", "https")
            ):
                self._touch(GlobWord(word[1:], False), "read")
            else:
                operands.append(alts)
            i += 1
        if name in _SEARCHERS and operands and not _has_pattern_option(rest):
            operands = operands[1:]
        self._by_role(role, operands)
        if self._recursive(name, rest):
            # A tree read names every file under each operand (the cwd
            # when none is given): `grep -r x .` reads .env too.
            roots = [a for alts in operands for a in alts] or [GlobWord(".", False)]
            for root in roots:
                self._touch(GlobWord(root.text.rstrip("/") + "/**", True), "read")
        return frozenset(extra)

    @staticmethod
    def _recursive(name: str, rest: list[str | None]) -> bool:
        letters = _RECURSIVE.get(name)
        if letters is None:
            return False
        if not letters:
            return True
        for w in rest:
            if w is None or not w.startswith("-") or w == "-":
                if name.endswith("tar") and w is not None and set(w) & set(letters):
                    return True  # tar's old style: `tar czf out .`
                continue
            if w.startswith("--"):
                if w in (
                    "--recursive",
                    "--archive",
                    "--dereference-recursive",
                    "--create",
                ):
                    return True
            elif set(w[1:]) & set(letters):
                return True
        return False

    def _by_role(self, role: str, operands: list[list[GlobWord]]) -> None:
        if role == "none" or not operands:
            return
        if role == "exec":
            for alt in operands[0]:
                self._touch(alt, "exec")
            return
        last = operands[-1] if role in ("copy", "move") and len(operands) > 1 else None
        for alts in operands if last is None else operands[:-1]:
            for alt in alts:
                if role == "move":
                    self._touch(alt, "delete")
                self._touch(alt, "read" if role in ("read", "copy", "move") else role)
        for alt in last or ():
            self._touch(alt, "write")


def _has_pattern_option(rest: list[str | None]) -> bool:
    """``grep -e PAT`` / ``-f FILE``: then every operand is a file."""
    return any(
        w in ("-e", "-f", "--regexp", "--file")
        or (w or "").startswith(("--regexp=", "--file="))
        for w in rest
    )


def _is_glob(word: str) -> bool:
    return any(c in word for c in "*?[")
