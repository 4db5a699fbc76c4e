"""Argument views of one tool call: its shell command, its path(s), its URL(s).

A view is read through the tool's specs in :mod:`._agents`, then the
argument of the view's own name (``command``, ``path``, ``url``); for a tool
the tables do not know, that argument alone, which is exactly vally's lookup. ``None``
means the call has no such view (vally's "configuration error" when a filter
asks for it); a view that is present is never empty.

Paths are normalised lexically (no file system: the guard runs beside the
agent, not necessarily in its cwd): ``.`` segments and repeated slashes go,
``..`` is resolved, a trailing slash is dropped. A relative path is seen in
two spellings, plain (``src/a.ts``) and explicit (``./src/a.ts``), and a
pattern matches the path if it matches either: ``./.env``, ``sub/../.env``
and ``/repo/.env`` all end in ``/.env``, while vally's ``^src/`` still
matches ``src/a.ts``. The guard does not know the agent's OS, so a path
Windows would read as another file (``sub\\.env``, ``.env::$DATA``) is also
seen in Windows' reading (:func:`_windows`); a drive, UNC or device path
(``C:\\x``, ``\\\\server\\x``, ``\\\\?\\C:\\x``) only in that one.
"""

from __future__ import annotations

import functools
import posixpath
from typing import TYPE_CHECKING, Any, Final

from trajgrade.graders.matching._agents import UNION

if TYPE_CHECKING:
    import re
    from collections.abc import Callable

    from trajgrade.events import ToolCall

__all__ = (
    "call_kind",
    "command_of",
    "normal_paths",
    "patch_added",
    "patch_paths",
    "patch_text",
    "project_paths",
    "view_of",
)

_PATCH_KEYS = ("input", "patch", "command")


# Compiled on first use: most hook calls need neither (start-up time).
@functools.cache
def _patch_file() -> re.Pattern[str]:
    import re

    # apply_patch's file headers (Codex's patch format). Codex trims a hunk
    # header line before reading it, so `\t*** Add File: x` adds x; it reads
    # `*** Move to:` untrimmed (indented, that line is context, not a move).
    # A path's trailing blanks are dropped: the view errs toward naming more.
    return re.compile(
        r"^[^\S\n]*\*\*\* (?:Add|Update|Delete) File: (.+?)[^\S\n]*$"
        r"|^\*\*\* Move to: (.+?)[^\S\n]*$",
        re.MULTILINE,
    )


@functools.cache
def _url() -> re.Pattern[str]:
    import re

    return re.compile(r"\bhttps?://[^\s\"'<>()\[\]{}]+", re.IGNORECASE)


def _drive(path: str) -> bool:
    """A Windows drive path (``C:\\x`` or ``C:/x``)."""
    return len(path) > 2 and path[1] == ":" and path[0].isalpha() and path[2] in "\\/"


def _windows_only(path: str) -> bool:
    """A path no POSIX system would write: a drive path, or a UNC or device
    path (``\\\\server\\share``, ``\\\\?\\C:\\x``)."""
    return _drive(path) or path.startswith("\\\\")


def _windows(path: str) -> str:
    """The file Windows opens for ``path``, spelt with ``/``: the device or
    verbatim prefix (``\\\\?\\``, ``\\\\.\\``, ``\\??\\``) and NTFS stream suffixes
    (``:name``, ``::$DATA``) dropped, and each name's trailing dots and
    spaces, which Win32 ignores. A drive-relative ``C:x`` is ``x``."""
    p = path.replace("\\", "/")
    if p[:4] in ("//?/", "//./", "/??/"):
        p = p[4:]
        if p[:4].upper() == "UNC/":
            p = "//" + p[4:]
    drive = ""
    if len(p) > 1 and p[1] == ":" and p[0].isalpha():
        drive, p = (p[:2], p[2:]) if p[2:3] == "/" else ("", p[2:])
    names = []
    for name in p.split("/"):
        name = name.split(":", 1)[0]
        names.append(name if name.strip(".") == "" else name.rstrip(". "))
    return drive + "/".join(names)


def call_kind(call: ToolCall) -> str | None:
    """The kind of this call (None: an unknown tool)."""
    tool = UNION.get(call.name)
    if tool is None:
        return "mcp" if call.name.startswith("mcp__") else None
    if tool.by_arg is not None:
        key, table = tool.by_arg
        value = (call.args or {}).get(key)
        for v, kind in table:
            if value == v:
                return kind
    return tool.kind


def view_of(call: ToolCall, view: str) -> list[str] | None:
    """The values of ``view`` on this call: a one-item list for ``command``,
    every path or URL otherwise; None when the call has none."""
    args = call.args or {}
    specs = _SPECS.get((call.name, view)) or _specs(call.name, view)
    if specs == (view,):  # the common case: one string argument (vally's)
        value = args.get(view)
        if not isinstance(value, str):
            return None
        return normal_paths([value]) if view == "path" else [value]
    values: list[str] = []
    for spec in specs:
        values.extend(_read(spec, args, call, view))
        if values and view == "command":
            break  # the first spelling present is the command
    if not values:
        return None
    if view == "path":
        return normal_paths(values)
    return values


_SPECS: dict[tuple[str, str], tuple[str, ...]] = {}


def _specs(name: str, view: str) -> tuple[str, ...]:
    """Where ``view`` is read on tool ``name`` (memoised: names repeat)."""
    tool = UNION.get(name)
    specs: tuple[str, ...] = (view,)
    if tool is not None:
        # The argument of the view's own name comes last: hand-written traces
        # (agentv's `Read {path}`) spell it so.
        specs = tuple(dict.fromkeys((*getattr(tool, view), view)))
    if len(_SPECS) < 4096:
        _SPECS[name, view] = specs
    return specs


def command_of(call: ToolCall) -> str | None:
    """The shell command text of a call (an argv joined with shell quoting)."""
    got = view_of(call, "command")
    return None if got is None else got[0]


def _read(spec: str, args: dict[str, Any], call: ToolCall, view: str) -> list[str]:
    """The values one spec reads: ``@patch``, ``@<reader>:<key>`` (a string
    argument read through :data:`_TEXT_READERS`), or a dotted key."""
    if spec == "@patch":
        return _read_patch(args, call)
    if spec == "@patch_added":
        text = patch_text(args, call)
        added = None if text is None else patch_added(text)
        return [added] if added else []
    reader, colon, key = spec.partition(":")
    of_text = _TEXT_READERS.get(reader) if colon else None
    if of_text is not None:
        value = args.get(key)
        return of_text(value) if isinstance(value, str) else []
    return _read_key(spec, args, view)


def patch_text(args: dict[str, Any], call: ToolCall) -> str | None:
    """An ``apply_patch`` call's text: its raw text, else the first string
    of its patch arguments."""
    text = call.args_raw
    for key in _PATCH_KEYS:
        if text is not None:
            break
        value = args.get(key)
        text = value if isinstance(value, str) else None
    return text


def _read_patch(args: dict[str, Any], call: ToolCall) -> list[str]:
    """The paths of an ``apply_patch`` call."""
    text = patch_text(args, call)
    return patch_paths(text) if text is not None else []


def patch_added(text: str) -> str:
    """The lines an ``apply_patch`` text adds (``+`` lines, marker dropped),
    one per line: what the patch writes."""
    return "\n".join(line[1:] for line in text.splitlines() if line.startswith("+"))


def _read_key(spec: str, args: dict[str, Any], view: str) -> list[str]:
    """``key`` is a string (vally: anything else is no value); ``key[]`` a
    list: an argv for ``command``, several paths or URLs otherwise."""
    listed = spec.endswith("[]")
    values = _dig(args, (spec[:-2] if listed else spec).split("."))
    if not listed:
        return [v for v in values if isinstance(v, str)]  # "" too, as vally
    if view == "command":
        return [t for v in values if isinstance(v, list) and (t := _argv_text(v))]
    return [
        s for v in values if isinstance(v, list) for s in v if isinstance(s, str) and s
    ]


def _dig(value: Any, keys: list[str]) -> list[Any]:
    """The values at a dotted path; ``k[]`` walks every item of list ``k``."""
    found = [value]
    for key in keys:
        each = key.endswith("[]")
        name = key[:-2] if each else key
        nxt: list[Any] = []
        for v in found:
            got = v.get(name) if isinstance(v, dict) else None
            if got is None:
                continue
            if each:
                nxt.extend(got if isinstance(got, list) else ())
            else:
                nxt.append(got)
        found = nxt
    return found


def _argv_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(s, str) for s in value):
        import shlex

        # An argv: quoted so that the text re-parses to the same words.
        return shlex.join(value)
    return ""


_LOGIN_SHELLS = frozenset(("bash", "sh", "zsh"))


def _unwrap_login_shell(command: str) -> str:
    """The script of ``/bin/bash -lc '<script>'``, the wrapping `codex exec`
    reports around the command the model wrote; anything else as it is."""
    import shlex

    try:
        argv = shlex.split(command)
    except ValueError:
        return command
    if (
        len(argv) == 3
        and argv[0].rsplit("/", 1)[-1] in _LOGIN_SHELLS
        and argv[1] in ("-lc", "-c")
    ):
        return argv[2]
    return command


def _first_argument(line: str) -> list[str]:
    import shlex

    try:
        words = shlex.split(line.split("\n", 1)[0])
    except ValueError:
        return []
    return words[1:2]


def _urls_in(text: str) -> list[str]:
    return _url().findall(text)


def _login_shell_script(command: str) -> list[str]:
    return [_unwrap_login_shell(command)]


#: The spec readers of one string argument (``@urls:prompt``), by name.
_TEXT_READERS: Final[dict[str, Callable[[str], list[str]]]] = {
    "@urls": _urls_in,
    "@login_shell": _login_shell_script,
    "@word1": _first_argument,
}


def patch_paths(text: str) -> list[str]:
    """Every path an ``apply_patch`` text adds, updates, deletes or moves to."""
    return [a or b for a, b in _patch_file().findall(text)]


def normal_paths(paths: list[str]) -> list[str]:
    """Each path normalised; a relative one also in its ``./`` spelling; one
    that Windows would read as another file also in Windows' reading."""
    out: list[str] = []
    for p in paths:
        if not p:
            out.append(p)  # vally matches the empty string as it is
            continue
        windows = _windows(p)
        readings = [windows] if _windows_only(p) else [p, windows]
        for reading in dict.fromkeys(readings):
            _add_normal(out, reading)
    return out


def _add_normal(out: list[str], p: str) -> None:
    norm = posixpath.normpath(p) if p else "."
    if norm.startswith("//"):
        norm = "/" + norm.lstrip("/")  # normpath keeps a leading "//"
    if norm in out:
        return
    out.append(norm)
    if not norm.startswith("/") and not _drive(norm):
        if norm == ".":
            return
        if not norm.startswith("../") and norm != "..":
            out.append("./" + norm)


def project_paths(paths: list[str], root: str | None) -> list[str]:
    """The paths of a call's ``path`` view relative to the project root
    ``root`` (the call's cwd), plain (``src/a.ts``, never ``./src/a.ts``):
    a path inside the root loses its prefix, the root itself is ``.``, a
    path outside stays absolute. Without a root, a relative path is taken
    as relative to it and an absolute one stays absolute. The view's
    ``./`` spellings are dropped (one spelling per path: ``^(?!src/)``
    must not pass ``./src/a.ts``)."""
    base = None if not root else posixpath.normpath(root.replace("\\", "/"))
    out: list[str] = []
    for p in paths:
        if p.startswith("./"):
            continue  # the other spelling of a relative path already listed
        rel = p
        if base is not None and (p == base or p.startswith(base.rstrip("/") + "/")):
            rel = posixpath.relpath(p, base)
        if rel not in out:
            out.append(rel)
    return out
