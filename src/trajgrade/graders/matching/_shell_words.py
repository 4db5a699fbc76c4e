"""A bash command's words as the shell reads them, from tree-sitter-bash nodes.

Quote removal (``c\\url``, ``"cu"rl``, ``'cu'rl`` are ``curl``), line
continuations (bash joins ``cu\\<newline>rl``; tree-sitter reads two words),
and the backtick substitutions of an unquoted here-document body, which
tree-sitter-bash leaves as text. No tree-sitter import: these work on the
nodes and text the parser in :mod:`._shell` gives them.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = (
    "heredoc_substitutions",
    "join_continuations",
    "nodes",
    "quoted_heredoc",
    "static",
    "word_nodes",
    "words",
    "zsh_groups",
)

_ESCAPED: Final = re.compile(r"\\(.?)", re.DOTALL)
_SKIP_NODES: Final = frozenset(
    ("file_redirect", "heredoc_redirect", "herestring_redirect", "variable_assignment")
)


def nodes(root: Any) -> Iterator[Any]:
    """Every node of the tree, outermost first, in source order."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


def word_nodes(command: Any) -> list[Any]:
    """A command's word nodes, its name first (redirections and
    ``NAME=value`` prefixes left out)."""
    out: list[Any] = []
    for child in command.named_children:
        if child.type in _SKIP_NODES:
            continue
        node = child.named_children[0] if child.type == "command_name" else child
        if node.type == "command_name":
            continue
        out.append(node)
    return out


def words(command: Any) -> list[str | None]:
    """A command's words after quote removal; None for a word that is not
    static text (an expansion)."""
    return [static(node) for node in word_nodes(command)]


def static(node: Any) -> str | None:
    """The text of a word node after quote removal (None: an expansion)."""
    kind = node.type
    text: str = node.text.decode("utf-8", "replace")
    if kind in ("word", "number", "variable_name"):
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
        pieces = [static(c) for c in node.named_children]
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


def join_continuations(text: str) -> str:
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


def quoted_heredoc(redirect: Any) -> bool:
    """Whether a ``heredoc_redirect``'s delimiter is quoted (``<<'EOF'``,
    ``<<"EOF"``, ``<<\\EOF``): then its body is not expanded."""
    for child in redirect.children:
        if child.type == "heredoc_start":
            return any(q in child.text for q in (b"'", b'"', b"\\"))
    return False


def heredoc_substitutions(body: str) -> list[str] | None:
    """The commands of the backtick substitutions in an unquoted
    here-document body, which bash runs (tree-sitter-bash does not parse
    them); None when a backtick is not closed.

    In the body quotes are plain text and ``\\`` escapes only ``\\ $ `` and
    a newline; inside backticks ``\\$ \\` \\\\`` lose their backslash."""
    found: list[str] = []
    i, n = 0, len(body)
    while i < n:
        ch = body[i]
        if ch == "\\":
            i += 2
            continue
        if ch != "`":
            i += 1
            continue
        inner: list[str] = []
        i += 1
        while i < n and body[i] != "`":
            if body[i] == "\\" and i + 1 < n:
                nxt = body[i + 1]
                inner.append(nxt if nxt in "$`\\" else body[i : i + 2])
                i += 2
                continue
            inner.append(body[i])
            i += 1
        if i >= n:
            return None
        found.append("".join(inner))
        i += 1
    return found


#: A zsh glob group inside a word: between name characters, no space,
#: quote, expansion or operator within (``f()``, ``$(x)``, ``<(x)`` are
#: not). Never at a word's end: there zsh reads glob *qualifiers*, and
#: ``*(e,./x.sh,)`` or ``*(+cmd)`` runs code.
_ZSH_GROUP: Final = re.compile(r"(?<=[\w./@%-])\(([\w./@%,|*?-]+)\)(?=[\w./@%-])")


def zsh_groups(command: str) -> str:
    """``command`` with zsh's glob groups inside words (``app/(protected)/x``,
    ``src/(a|b).ts``: Codex on macOS runs zsh) made a ``*`` (a group that
    ends a word may be glob qualifiers, which can run code: it stays
    unreadable). Bash cannot
    parse them; read as ``*`` each such word is a pattern naming at least
    every path zsh makes of it (``.(e)nv`` is ``.*nv``, which names
    ``.env``). For a command bash cannot parse, never one it can."""
    return _ZSH_GROUP.sub("*", command)
