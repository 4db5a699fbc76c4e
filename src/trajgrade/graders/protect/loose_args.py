"""What an MCP tool (or any tool no table knows) does, guessed from its
arguments: :func:`loose_facts`.

MCP servers name their tools and arguments as they like, so there is no
table; the guess is deliberately conservative -- it names *more* paths,
URLs and modes than the tool may use, never fewer:

* an argument whose key says it holds a path (``path``, ``file``,
  ``filename``, ``dir``, ``root``, ``source``, ``destination``, …), a URL
  (``url``, ``uri``, ``href``, …) or a command (``command``, ``cmd``,
  ``script``, …) is one, at any depth, in lists too;
* any string that looks like a path (``/x``, ``./x``, ``../x``, ``~/x``,
  ``file://…``; with a World, a name with a dot that exists under the cwd)
  is a path, and any ``http(s)://`` in a string is a URL;
* the tool's own name says the mode (``read_file`` reads, ``write_file``
  writes, ``delete_*``/``move_*`` delete or move, ``execute_command`` and
  ``run_*`` run code, ``fetch*`` reaches the network); a name that says
  none both reads and writes every path it names;
* every string argument is content: it is sent to the server.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from trajgrade.graders.protect.facts import Touch

if TYPE_CHECKING:
    from collections.abc import Iterator

    from trajgrade.graders.protect.facts import Mode, World

__all__ = ("LooseFacts", "loose_facts")

_PATH_KEYS: Final = frozenset(
    [
        "path",
        "paths",
        "file",
        "files",
        "filename",
        "filenames",
        "filepath",
        "filepaths",
        "dir",
        "dirs",
        "directory",
        "directories",
        "root",
        "source",
        "sources",
        "src",
        "destination",
        "dest",
        "target",
        "folder",
        "cwd",
        "workdir",
        "workingdirectory",
        "location",
        "from",
        "to",
        "oldpath",
        "newpath",
        "notebookpath",
        "absolutepath",
    ]
)
_URL_KEYS: Final = frozenset(
    ["url", "urls", "uri", "uris", "href", "link", "links", "endpoint"]
)
_COMMAND_KEYS: Final = frozenset(
    ["command", "cmd", "commands", "script", "shell", "argv"]
)
_WRITE: Final = frozenset(
    [
        "write",
        "create",
        "edit",
        "update",
        "save",
        "put",
        "set",
        "append",
        "insert",
        "patch",
        "replace",
        "upload",
        "mkdir",
        "touch",
        "copy",
        "cp",
        "add",
    ]
)
_DELETE: Final = frozenset(
    ["delete", "remove", "rm", "move", "rename", "mv", "unlink", "trash"]
)
_EXEC: Final = frozenset(
    [
        "exec",
        "execute",
        "run",
        "eval",
        "shell",
        "command",
        "invoke",
        "spawn",
        "start",
        "launch",
    ]
)
_READ: Final = frozenset(
    [
        "read",
        "get",
        "list",
        "ls",
        "search",
        "find",
        "view",
        "show",
        "cat",
        "open",
        "fetch",
        "load",
        "query",
        "stat",
        "info",
        "describe",
        "download",
        "grep",
        "glob",
        "tree",
        "head",
        "tail",
        "diff",
    ]
)
_NETWORK: Final = frozenset(
    [
        "fetch",
        "http",
        "https",
        "request",
        "browse",
        "navigate",
        "download",
        "upload",
        "curl",
        "web",
        "url",
        "post",
        "send",
        "webhook",
    ]
)
#: Strings and depth walked, at most: the arguments are the agent's.
_STRINGS_MAX: Final = 512
_DEPTH_MAX: Final = 8
_URL: Final = re.compile(r"\bhttps?://[^\s\"'<>()\[\]{}]+", re.IGNORECASE)
_WORD: Final = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")


class LooseFacts(NamedTuple):
    touches: list[Touch]
    urls: list[str]
    commands: list[str]
    contents: list[str]
    capabilities: set[str]


def _words(name: str) -> set[str]:
    """The words of a tool name (``mcp__fs__read_file`` -> read, file)."""
    tail = name.rsplit("__", 1)[-1]
    return {w.lower() for w in _WORD.findall(tail)}


def _key(key: str) -> str:
    return key.lower().replace("_", "").replace("-", "")


def _strings(value: Any, key: str = "", depth: int = 0) -> Iterator[tuple[str, str]]:
    """(the nearest key, the string) for every string in the arguments."""
    if depth > _DEPTH_MAX:
        return
    if isinstance(value, str):
        yield key, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, _key(str(k)), depth + 1)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v, key, depth + 1)


def _looks_like_path(text: str, cwd: str | None, world: World | None) -> str | None:
    if "\n" in text or not text or len(text) > 4096:
        return None
    if text.startswith("file://"):
        return text[len("file://") :] or None
    if text.startswith(("/", "./", "../", "~/")) or text in (".", "..", "~"):
        return text
    if (
        world is not None
        and cwd is not None
        and "." in text
        and " " not in text
        and len(text) < 256
        and world.find(text, cwd) is not None
    ):
        return text
    return None


def _modes(words: set[str]) -> tuple[tuple[Mode, ...], set[str]]:
    """The modes a tool's name says, and the capabilities it adds."""
    modes: list[Mode] = []
    caps: set[str] = set()
    if words & _READ:
        modes.append("read")
    if words & _WRITE:
        modes.append("write")
    if words & _DELETE:
        modes += ["delete", "write"]  # a move also writes where it moves to
    if words & _EXEC:
        modes.append("exec")
        caps.add("run-code")
    if words & _NETWORK:
        caps.add("network")
    if not modes:
        modes = ["read", "write"]
    return tuple(dict.fromkeys(modes)), caps


def loose_facts(
    name: str, args: dict[str, Any], *, cwd: str | None, world: World | None
) -> LooseFacts:
    """The paths, URLs, commands and content of a tool known by no table."""
    modes, caps = _modes(_words(name))
    out = LooseFacts([], [], [], [], caps)
    for count, (key, text) in enumerate(_strings(args)):
        if count >= _STRINGS_MAX:
            break
        out.contents.append(text)
        out.urls.extend(_URL.findall(text))
        if key in _URL_KEYS and not _URL.match(text):
            out.urls.append(text)
        if key in _COMMAND_KEYS:
            out.commands.append(text)
            caps.add("run-code")
            continue
        path = _looks_like_path(text, cwd, world)
        if path is None and key in _PATH_KEYS and text and "\n" not in text:
            path = text
        if path is not None:
            out.touches.extend(Touch(path=path, mode=m) for m in modes)
    if out.urls:
        caps.add("network")
    return out
