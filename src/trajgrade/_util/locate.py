r"""Where config problems are: YAML line maps, msgspec error paths, messages.

Helpers for ``trajgrade.config.model``: they turn msgspec's ``- at `$.a[0].b```
paths and PyYAML's node marks into :class:`~trajgrade.errors.Location`\ s,
and collect every structural error of a grader's config, not just the first.
A ``locate`` callable (path -> Location) stands for the config file.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

import msgspec

from trajgrade.errors import ConfigError, Location

__all__ = (
    "Locate",
    "Path",
    "convert_all",
    "duplicate_keys",
    "explain",
    "line_column",
    "line_map",
    "one_line",
    "parse_path",
    "relocate",
    "render",
    "validation_error",
    "yaml_line",
)

Path = tuple[str | int, ...]
#: Maps a field path to its place in the config file.
Locate = Callable[[Sequence[str | int]], Location]

_AT: Final = re.compile(r"^(?P<msg>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)
_SEG: Final = re.compile(r"\.([^.\[]+)|\[(\d+)\]|\[(\"(?:[^\"\\]|\\.)*\")\]|\[\.\.\.\]")


def parse_path(text: str) -> Path:
    out: list[str | int] = []
    for m in _SEG.finditer(text):
        key, idx, quoted = m.groups()
        if key is not None:
            out.append(key)
        elif idx is not None:
            out.append(int(idx))
        elif quoted is not None:
            out.append(msgspec.json.decode(quoted))
    return tuple(out)


def validation_error(
    exc: msgspec.ValidationError, locate: Locate, base: Path, struct: type[Any]
) -> ConfigError:
    return _validation_error_at(exc, locate, base, struct)[0]


def _validation_error_at(
    exc: msgspec.ValidationError, locate: Locate, base: Path, struct: type[Any]
) -> tuple[ConfigError, Path]:
    message, rel = explain(exc, struct)
    return ConfigError(message, location=locate((*base, *rel))), rel


def explain(exc: msgspec.ValidationError, struct: type[Any]) -> tuple[str, Path]:
    """msgspec's error converting into ``struct`` as trajgrade words it
    (a did-you-mean for an unknown field, the choices for a bad enum value),
    and the path of the offending field relative to ``struct``."""
    m = _AT.match(str(exc))
    assert m is not None
    message, rel = m["msg"], parse_path(m["path"] or "")
    unknown = re.match(r"Object contains unknown field `(.+)`", message)
    if unknown:
        field = unknown.group(1)
        rel = (*rel, field)
        import difflib  # error messages only: not on the hook path

        close = difflib.get_close_matches(field, sorted(_field_names(struct)), n=1)
        hint = f"; did you mean `{close[0]}`?" if close else "; remove it"
        message = f"unknown field `{field}`{hint}"
    invalid = re.match(r"Invalid enum value (.+)", message)
    if invalid and rel and (choices := _choices(struct, rel)):
        got = invalid.group(1)
        import difflib  # error messages only: not on the hook path

        close = difflib.get_close_matches(got.strip("'\""), choices, n=1)
        hint = f"; did you mean `{close[0]}`?" if close else ""
        message = f"`{rel[-1]}` must be one of {', '.join(choices)} (got {got}){hint}"
    missing = re.match(r"Object missing required field `(.+)`", message)
    if missing:
        rel = (*rel, missing.group(1))
        message = f"missing required field `{missing.group(1)}`"
    if message.startswith("Expected") and rel:
        message = f"{message[0].lower()}{message[1:]} for `{rel[-1]}`"
    return message, rel


def convert_all(
    raw: dict[str, Any], struct: type[Any], locate: Locate, base: Path
) -> tuple[Any | None, list[ConfigError]]:
    """Convert ``raw`` into ``struct``, collecting every structural error.

    msgspec stops at the first error; to report the others too, the offending
    key is dropped from a copy and conversion is retried. The returned config
    (None when a problem cannot be dropped) is only used to look for semantic
    errors as well; a grader with structural errors is never built.
    """
    data = copy.deepcopy(raw)
    errors: list[ConfigError] = []
    dropped: set[Path] = set()
    for _ in range(_MAX_ERRORS_PER_GRADER):
        try:
            return msgspec.convert(data, struct), errors
        except msgspec.ValidationError as exc:
            error, rel = _validation_error_at(exc, locate, base, struct)
            if rel in dropped:
                return None, errors
            errors.append(error)
            dropped.add(rel)
            if not _drop(data, rel):
                return None, errors
    return None, errors


_MAX_ERRORS_PER_GRADER: Final = 50


def _drop(data: Any, rel: Path) -> bool:
    """Delete the mapping key at ``rel``; False if ``rel`` is not such a key."""
    if not rel or not isinstance(rel[-1], str):
        return False
    node = data
    for seg in rel[:-1]:
        try:
            node = node[seg]
        except (KeyError, IndexError, TypeError):
            return False
    if isinstance(node, dict) and rel[-1] in node:
        del node[rel[-1]]
        return True
    return False


def relocate(exc: ConfigError, locate: Locate, base: Path) -> ConfigError:
    rel = parse_path("." + exc.location.field) if exc.location.field else ()
    return ConfigError(exc.message, location=locate((*base, *rel)))


def _field_names(struct: type[Any], seen: set[type[Any]] | None = None) -> set[str]:
    seen = seen if seen is not None else set()
    if struct in seen or not (
        isinstance(struct, type) and issubclass(struct, msgspec.Struct)
    ):
        return set()
    seen.add(struct)
    names = set(struct.__struct_fields__)
    for info in msgspec.inspect.type_info(struct).fields:  # type: ignore[attr-defined]
        for inner in _struct_types(info.type):
            names |= _field_names(inner, seen)
    return names


def _struct_types(t: msgspec.inspect.Type) -> Iterator[type[Any]]:
    if isinstance(t, msgspec.inspect.StructType):
        yield t.cls
    for attr in ("item_type", "value_type", "types"):
        inner = getattr(t, attr, None)
        if isinstance(inner, tuple):
            for x in inner:
                yield from _struct_types(x)
        elif inner is not None:
            yield from _struct_types(inner)


def _choices(struct: type[Any], rel: Path) -> list[str]:
    """The values allowed at ``rel`` in ``struct`` (an enum or a literal),
    so a bad one is answered with the list, not msgspec's bare "Invalid
    enum value"."""
    types: list[msgspec.inspect.Type] = [msgspec.inspect.type_info(struct)]
    for seg in rel:
        found: list[msgspec.inspect.Type] = []
        for t in _alternatives(types):
            if isinstance(seg, str) and isinstance(t, msgspec.inspect.StructType):
                found += [f.type for f in t.fields if f.encode_name == seg]
            elif isinstance(seg, str) and isinstance(t, msgspec.inspect.DictType):
                found.append(t.value_type)
            elif isinstance(seg, int) and hasattr(t, "item_type"):
                found.append(t.item_type)
        types = found
    values: list[str] = []
    for t in _alternatives(types):
        if isinstance(t, msgspec.inspect.EnumType):
            values += [str(m.value) for m in t.cls]
        elif isinstance(t, msgspec.inspect.LiteralType):
            values += [str(v) for v in t.values]
    return values


def _alternatives(
    types: list[msgspec.inspect.Type],
) -> Iterator[msgspec.inspect.Type]:
    for t in types:
        if isinstance(t, msgspec.inspect.UnionType):
            yield from t.types
        else:
            yield t


def render(path: Path) -> str:
    out = ""
    for seg in path:
        out += f"[{seg}]" if isinstance(seg, int) else (f".{seg}" if out else str(seg))
    return out


def line_map(root: Any) -> dict[Path, int]:
    """Line of every field path in a composed YAML node tree (see trajgrade.config._yaml)."""
    import yaml

    out: dict[Path, int] = {}

    def walk(node: yaml.Node, path: Path) -> None:
        out[path] = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            for knode, vnode in node.value:
                key = (
                    knode.value
                    if isinstance(knode, yaml.ScalarNode)
                    else str(knode.start_mark.line)
                )
                out[(*path, key)] = knode.start_mark.line + 1
                walk(vnode, (*path, key))
                # a key's own line beats its value's (block values start below it)
                out[(*path, key)] = knode.start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, (*path, i))

    if root is not None:
        walk(root, ())
    return out


def yaml_line(exc: Exception) -> int | None:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if mark is not None:
        return int(mark.line) + 1
    m = re.search(r"line (\d+)", str(exc))
    return int(m.group(1)) if m else None


def line_column(text: str, position: int) -> tuple[int, int]:
    """The 1-based line and column of ``text[position]``."""
    line_start = text.rfind("\n", 0, position) + 1
    return text.count("\n", 0, position) + 1, position - line_start + 1


def one_line(exc: Exception) -> str:
    """A parser error on one line. PyYAML's marks name the stream it read
    (``in "<unicode string>"``), not the file: the caller's location names the
    file, so marks are given as line and column only."""
    context, problem = getattr(exc, "context", None), getattr(exc, "problem", None)
    if not (context or problem):
        return " ".join(str(exc).split())

    def at(text: str, mark: Any) -> str:
        return (
            f"{text} (line {mark.line + 1}, column {mark.column + 1})" if mark else text
        )

    parts = [at(context, getattr(exc, "context_mark", None))] if context else []
    if problem:
        parts.append(at(problem, getattr(exc, "problem_mark", None)))
    return " ".join(": ".join(parts).split())


def duplicate_keys(root: Any) -> list[tuple[Path, int, int]]:
    """Mapping keys written twice: (path, first line, repeated line).

    YAML keeps only the last value of a repeated key, so a second ``graders:``
    block would silently replace the first; the loader reports these instead.
    """
    import yaml

    found: list[tuple[Path, int, int]] = []

    def walk(node: yaml.Node, path: Path) -> None:
        if isinstance(node, yaml.MappingNode):
            seen: dict[str, int] = {}
            for knode, vnode in node.value:
                key = knode.value if isinstance(knode, yaml.ScalarNode) else None
                if isinstance(key, str) and key != "<<":
                    line = knode.start_mark.line + 1
                    if key in seen:
                        found.append(((*path, key), seen[key], line))
                    seen.setdefault(key, line)
                    walk(vnode, (*path, key))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, (*path, i))

    if root is not None:
        walk(root, ())
    return found
