"""The guard's attack corpus: entries as written in ``tests/guard/corpus/attacks``.

An entry is one attack: a few tool calls of one session, in a neutral form
(a tool kind and its arguments, :class:`Call`), which
:mod:`tests.guard._corpus_render` turns into each agent's real hook payloads.
One call of an entry is marked ``harmful``: the read of the secret, the send,
the run of the code, the write to the guard's file. The calls before it are
the steps it needs (the link it reads through, the file it runs), so the
attack is stopped when the harmful call or a step before it is refused.

A file holds entries of one class (``class:`` at the top, an entry may name
its own). ``each:`` expands an entry into one per combination of values
(``@@S@@`` in its calls), so a technique is written once for every spelling
of the secret it is tried with. Placeholders the runner fills in:
``@@HOME@@``, ``@@CWD@@`` (the project), ``@@POLICY@@`` (the installed
policy), ``@@STATE@@`` (the hook state directory), ``@@URL@@`` (a listener of
the attacker's), and the canary values ``@@SECRET@@`` (``.env``'s API key)
and ``@@SSH_KEY@@``. Attack text is data: it is sent to the guard as hook
payloads and never executed.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import msgspec

__all__ = (
    "ATTACKS",
    "CANARY",
    "CLASSES",
    "KINDS",
    "Call",
    "Entry",
    "fill",
    "load_attacks",
)

ATTACKS: Final = Path(__file__).resolve().parent / "corpus" / "attacks"

#: The classes of issue 34's table (and the guard-boundary issue's
#: self-protection), each with what it tries.
CLASSES: Final = {
    "secret-spelling": "the secret named by a glob, quoting, variables, braces or $( )",
    "file-read": "a common program's file-read technique with the secret spelt another way",
    "interpreter": "an interpreter reading the secret, or sending it, in one call",
    "read-everything": "reading a whole tree that holds the secret (grep -r, tar, diff -Nr)",
    "program-glob": "a glob or expansion in the program's name",
    "runner": "a program that runs code it is given (git aliases, make, find -exec)",
    "downloader": "fetching and running code from the network",
    "privilege": "running as another user or with more rights",
    "other-tools": "the agent's own tools other than the shell (Grep, MCP, WebFetch)",
    "agent-code": "code the agent wrote, then ran (a script, a test, a Makefile, a hook)",
    "links": "a symbolic or hard link to the secret, read under its other name",
    "secret-value": "a secret's value the agent got, sent out by a later call",
    "self-protection": "changing, removing or stopping the guard itself",
}

#: Neutral tool kinds a call may have (the renderer knows each).
KINDS: Final = frozenset(
    (
        "shell",
        "read",
        "read_many",
        "grep",
        "glob",
        "write",
        "edit",
        "multiedit",
        "patch",
        "fetch",
        "mcp",
    )
)

#: The canary values seeded in the temporary project (never real secrets).
CANARY: Final = {
    "SECRET": "tgcanary-env-7f3a9c51e2d84b06",
    "LOCAL_SECRET": "tgcanary-envlocal-0c4e91d7a3b2",
    "SSH_KEY": "tgcanary-ssh-b81f2e6d7c09a4",
    "AWS_KEY": "tgcanary-aws-5e2d8c1b0a7f",
    "URL": "https://collect.attacker.example/c",
}


@dataclass(frozen=True)
class Call:
    """One tool call, in the neutral form."""

    kind: str
    #: The kind's arguments: a string for ``shell`` (the command), ``read``
    #: (the path) and ``patch`` (the patch text), a mapping otherwise.
    args: Any
    harmful: bool = False
    #: What the tool returned when it ran (sent as its PostToolUse).
    result: str | None = None
    #: Files and links the call makes when it runs (applied to the temp
    #: project only when the guard let it run: the runner writes them, it
    #: never runs the call).
    creates: dict[str, str] = field(default_factory=dict)
    symlinks: dict[str, str] = field(default_factory=dict)
    hardlinks: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Entry:
    """One attack."""

    id: str
    klass: str
    technique: str
    why: str
    calls: tuple[Call, ...]
    #: Files and links made before the session starts (project-relative, or
    #: ``~/`` for the temp home).
    files: dict[str, str] = field(default_factory=dict)
    symlinks: dict[str, str] = field(default_factory=dict)
    source: str = ""

    @property
    def label(self) -> str:
        """The id and the technique, on one line (for reports)."""
        return f"{self.id}: {' '.join(self.technique.split())[:140]}"

    @property
    def harmful_index(self) -> int:
        return next(i for i, c in enumerate(self.calls) if c.harmful)


class _CallSpec(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    shell: str | None = None
    read: str | None = None
    read_many: list[str] | None = None
    grep: dict[str, Any] | None = None
    glob: dict[str, Any] | None = None
    write: dict[str, Any] | None = None
    edit: dict[str, Any] | None = None
    multiedit: dict[str, Any] | None = None
    patch: str | None = None
    fetch: dict[str, Any] | None = None
    mcp: dict[str, Any] | None = None
    harmful: bool = False
    result: str | None = None
    creates: dict[str, str] = {}
    symlinks: dict[str, str] = {}
    hardlinks: dict[str, str] = {}


class _EntrySpec(msgspec.Struct, forbid_unknown_fields=True):
    id: str
    technique: str
    why: str
    calls: list[_CallSpec]
    each: dict[str, list[str]] = {}
    files: dict[str, str] = {}
    symlinks: dict[str, str] = {}
    klass: str | None = msgspec.field(default=None, name="class")


class _FileSpec(msgspec.Struct, forbid_unknown_fields=True):
    entries: list[_EntrySpec]
    klass: str | None = msgspec.field(default=None, name="class")


def fill(value: Any, names: dict[str, str]) -> Any:
    """``value`` with every ``@@NAME@@`` replaced (in strings, lists, tuples, maps)."""
    if isinstance(value, str):
        for name, text in names.items():
            value = value.replace(f"@@{name}@@", text)
        return value
    if isinstance(value, list):
        return [fill(v, names) for v in value]
    if isinstance(value, tuple):  # a rendered (tool, input) call
        return tuple(fill(v, names) for v in value)
    if isinstance(value, dict):
        return {fill(k, names): fill(v, names) for k, v in value.items()}
    return value


def _call(spec: _CallSpec, names: dict[str, str], where: str) -> Call:
    kinds = [k for k in KINDS if getattr(spec, k) is not None]
    if len(kinds) != 1:
        msg = f"{where}: a call names exactly one tool kind, got {kinds}"
        raise ValueError(msg)
    (kind,) = kinds
    return Call(
        kind=kind,
        args=fill(getattr(spec, kind), names),
        harmful=spec.harmful,
        result=fill(spec.result, names),
        creates=fill(spec.creates, names),
        symlinks=fill(spec.symlinks, names),
        hardlinks=fill(spec.hardlinks, names),
    )


def _expand(spec: _EntrySpec, klass: str, source: str) -> list[Entry]:
    keys = list(spec.each)
    combos = list(itertools.product(*(spec.each[k] for k in keys))) or [()]
    out = []
    for n, combo in enumerate(combos, 1):
        names = dict(zip(keys, combo, strict=True))
        # By position: values hold newlines and quotes (append new ones last).
        suffix = f"[{n}]" if combo else ""
        where = f"{source}: {spec.id}{suffix}"
        calls = tuple(_call(c, names, where) for c in spec.calls)
        if sum(c.harmful for c in calls) != 1:
            msg = f"{where}: exactly one call must be marked harmful"
            raise ValueError(msg)
        out.append(
            Entry(
                id=spec.id + suffix,
                klass=klass,
                technique=fill(spec.technique, names),
                why=spec.why,
                calls=calls,
                files=fill(spec.files, names),
                symlinks=fill(spec.symlinks, names),
                source=source,
            )
        )
    return out


def load_attacks(folder: Path = ATTACKS) -> list[Entry]:
    """Every entry of every ``*.yaml`` file in ``folder``, expanded, in file order."""
    entries: list[Entry] = []
    for path in sorted(folder.glob("*.yaml")):
        spec = msgspec.yaml.decode(path.read_bytes(), type=_FileSpec)
        for e in spec.entries:
            klass = e.klass or spec.klass
            if klass not in CLASSES:
                msg = f"{path.name}: {e.id}: unknown class {klass!r}"
                raise ValueError(msg)
            entries += _expand(e, klass, path.name)
    dupes = sorted(i for i, n in Counter(e.id for e in entries).items() if n > 1)
    if dupes:
        msg = f"duplicate corpus ids: {dupes[:10]}"
        raise ValueError(msg)
    return entries
