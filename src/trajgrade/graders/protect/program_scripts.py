"""What a sed script or an awk program does: the capabilities it adds and
the files it names.

sed (GNU sed's manual): the ``e`` command and the ``e`` flag of ``s`` run a
shell command; ``w``/``W`` and the ``w`` flag of ``s`` write a file, ``r``/
``R`` read one. awk (POSIX, gawk's manual): ``system()``, ``print | "cmd"``
and ``"cmd" | getline`` run commands; ``print > "f"``/``>> "f"`` write a
file and ``getline < "f"`` reads one. A script this reader cannot follow is
taken to do all of it (run-code and write): conservative.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ("awk_program", "sed_script")

ScriptFacts = tuple[frozenset[str], list[tuple[str, str]]]

_ALL: Final = frozenset({"run-code", "write"})
_SED_FILE_COMMANDS: Final = {"w": "write", "W": "write", "r": "read", "R": "read"}
#: Commands whose argument runs to the end of the line (text or a label).
_SED_LINE_COMMANDS: Final = frozenset("aic:btTvlqQLF#")
_SED_PLAIN: Final = frozenset("=dDgGhHnNpPxzl;{}!")
_AWK_STRING: Final = r'"((?:\\.|[^"\\])*)"'
_AWK_RUN: Final = re.compile(r"\bsystem\s*\(|(?<!\|)\|(?!\|)\s*&?\s*(?:\"|\w)")
_AWK_WRITE: Final = re.compile(r">>?\s*" + _AWK_STRING)
_AWK_READ: Final = re.compile(r"getline\b[^;|]*<\s*" + _AWK_STRING)
#: getline < (".e" "nv"), getline < name: a file the program builds; also
#: getline < ".e" "nv", which gawk and mawk read as ".e" but an awk that
#: binds the concatenation first reads as ".env".
_AWK_READ_BUILT: Final = re.compile(
    r"getline\b[^;|]*<(?!\s*\")|getline\b[^;|]*<\s*" + _AWK_STRING + r"\s*[\"\w(]"
)
_AWK_ANY_REDIRECT: Final = re.compile(r"(?:print|printf)[^;}]*>")


def sed_script(script: str) -> ScriptFacts:
    """What a sed script adds: (capabilities, [(file, mode)])."""
    try:
        return _Sed(script).read()
    except (IndexError, ValueError):
        return _ALL, []


class _Sed:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.caps: set[str] = set()
        self.files: list[tuple[str, str]] = []

    def read(self) -> ScriptFacts:
        text = self.text
        while self.i < len(text):
            c = text[self.i]
            if c.isspace() or c in _SED_PLAIN or c.isdigit() or c in "$,~+":
                self.i += 1
            elif c in "/\\":
                self._address(c)
            elif c in ("s", "y"):
                self._substitute(c)
            elif c == "e":
                self.caps.add("run-code")
                self._line()
            elif c in _SED_FILE_COMMANDS:
                self.i += 1
                self._file(_SED_FILE_COMMANDS[c])
            elif c in _SED_LINE_COMMANDS:
                self._line()
            else:
                raise ValueError(c)
        return frozenset(self.caps), self.files

    def _address(self, c: str) -> None:
        if c == "\\":
            self.i += 1
        delim = self.text[self.i]
        self._part(delim)
        while self.i < len(self.text) and self.text[self.i] in "IM":
            self.i += 1

    def _part(self, delim: str) -> None:
        """Skip from a delimiter to the next unescaped one."""
        self.i += 1
        while self.text[self.i] != delim:
            self.i += 2 if self.text[self.i] == "\\" else 1
        self.i += 1

    def _substitute(self, c: str) -> None:
        self.i += 1
        delim = self.text[self.i]
        if delim in "\n\\":
            raise ValueError(delim)
        self._part(delim)
        self.i -= 1
        self._part(delim)
        if c == "y":
            return
        while self.i < len(self.text) and self.text[self.i] not in ";\n}":
            flag = self.text[self.i]
            self.i += 1
            if flag == "e":
                self.caps.add("run-code")
            elif flag == "w":
                self._file("write")
                return

    def _file(self, mode: str) -> None:
        end = self.text.find("\n", self.i)
        end = len(self.text) if end < 0 else end
        name = self.text[self.i : end].strip()
        self.i = end
        if mode == "write":
            self.caps.add("write")
        if name and name not in ("/dev/stdout", "/dev/stderr"):
            self.files.append((name, mode))

    def _line(self) -> None:
        end = self.text.find("\n", self.i)
        self.i = len(self.text) if end < 0 else end


def awk_program(program: str) -> ScriptFacts:
    """What an awk program adds: (capabilities, [(file, mode)])."""
    caps: set[str] = set()
    files: list[tuple[str, str]] = []
    if _AWK_RUN.search(program):
        caps.add("run-code")
    for m in _AWK_WRITE.finditer(program):
        caps.add("write")
        files.append((m.group(1), "write"))
    files.extend((m.group(1), "read") for m in _AWK_READ.finditer(program))
    if _AWK_READ_BUILT.search(program):
        # The name is concatenated or in a variable: it could be any file.
        files.append(("**", "read"))
    if _AWK_ANY_REDIRECT.search(program) and "write" not in caps:
        # print > name, with the name in a variable: any file.
        caps.add("write")
        files.append(("*", "write"))
    return frozenset(caps), files
