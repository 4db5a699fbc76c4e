"""YAML with each upstream's schema, and a bound on alias expansion.

Each upstream reads its own files with its own YAML library, and the two
YAML versions disagree on plain scalars: agentv and vally are TypeScript and
read YAML 1.2 (the ``yaml`` npm package, core schema), letta-evals reads
YAML 1.1 (PyYAML ``safe_load``). ``yes``, ``on``, ``010``, ``1_000``,
``1:30``, ``2024-01-01`` are booleans, octals, numbers and dates in 1.1 but
strings or decimals in 1.2, and ``1e3``, ``0o17`` are numbers only in 1.2.
So a file is composed once, its layout recognised from the top-level keys
(plain words, the same in both versions), and its scalars resolved with the
version of the tool whose layout it is (:func:`load`).

Both schemas run on PyYAML (already needed for msgspec's YAML), whose node
marks give config errors their line numbers; the 1.2 core schema is a
resolver and a constructor configured as the ``yaml`` package's core schema.

Aliases: a 414-byte "billion laughs" document expands to ~10^9 nodes once
anything walks it as a tree (line maps, validation, copies). The composer
counts the nodes every alias stands for and refuses the document, at the
alias's line, once aliases add more than :data:`MAX_ALIAS_NODES` nodes;
a recursive alias (an anchor used inside itself) is refused too.
"""

from __future__ import annotations

import enum
import math
import re
from typing import Any, Final

import yaml
from yaml.composer import ComposerError
from yaml.events import AliasEvent

__all__ = (
    "MAX_ALIAS_NODES",
    "AliasLimitError",
    "Schema",
    "compose",
    "construct",
    "safe_load",
)

#: Nodes that aliases may add to one document (a real config uses a handful).
MAX_ALIAS_NODES: Final = 10_000


class Schema(enum.Enum):
    """Which YAML version resolves plain scalars."""

    YAML_1_1 = "1.1"  # PyYAML safe_load: letta-evals, datasets
    YAML_1_2 = "1.2"  # the `yaml` npm package's core schema: agentv, vally


class AliasLimitError(ComposerError):
    """Aliases expand past MAX_ALIAS_NODES, or an alias refers to itself."""


class _BoundedComposer(yaml.composer.Composer):
    """PyYAML's composer, counting what each alias expands to."""

    def __init__(self) -> None:
        super().__init__()
        self._expanded = 0
        self._sizes: dict[int, int] = {}
        self._open: set[str] = set()

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(AliasEvent):  # type: ignore[attr-defined]
            event = self.peek_event()  # type: ignore[attr-defined]
            anchor = event.anchor
            if anchor in self._open:
                raise AliasLimitError(
                    None,
                    None,
                    f"alias *{anchor} is used inside its own anchor &{anchor} "
                    "(a recursive document); write the value out instead",
                    event.start_mark,
                )
            if anchor in self.anchors:
                self._expanded += _size(self.anchors[anchor], self._sizes)
                if self._expanded > MAX_ALIAS_NODES:
                    raise AliasLimitError(
                        None,
                        None,
                        f"aliases expand to more than {MAX_ALIAS_NODES:,} nodes "
                        f"(at *{anchor}); a config that large through aliases is "
                        "refused as a resource bomb: write the values out or use fewer aliases",
                        event.start_mark,
                    )
        return super().compose_node(parent, index)

    def compose_sequence_node(self, anchor: Any) -> Any:
        return self._open_while(anchor, super().compose_sequence_node)

    def compose_mapping_node(self, anchor: Any) -> Any:
        return self._open_while(anchor, super().compose_mapping_node)

    def _open_while(self, anchor: str | None, compose: Any) -> Any:
        if anchor is None:
            return compose(anchor)
        self._open.add(anchor)
        try:
            return compose(anchor)
        finally:
            self._open.discard(anchor)


def _size(node: yaml.Node, sizes: dict[int, int]) -> int:
    """Nodes in ``node`` with aliases expanded (memoised: the graph is a DAG)."""
    known = sizes.get(id(node))
    if known is not None:
        return known
    total = 1
    if isinstance(node, yaml.SequenceNode):
        total += sum(_size(item, sizes) for item in node.value)
    elif isinstance(node, yaml.MappingNode):
        total += sum(_size(k, sizes) + _size(v, sizes) for k, v in node.value)
    sizes[id(node)] = total
    return total


# ------------------------------------------------------------------ YAML 1.2
class _CoreResolver(yaml.resolver.BaseResolver):
    """Plain-scalar tags of the YAML 1.2 core schema (as the `yaml` package)."""

    yaml_implicit_resolvers: dict[Any, Any] = {}


_CORE: Final = (
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", list("tTfF")),
    (
        "tag:yaml.org,2002:int",
        r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$",
        list("-+0123456789"),
    ),
    (
        "tag:yaml.org,2002:float",
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN)$",
        list("-+.0123456789"),
    ),
)
for _tag, _pattern, _first in _CORE:
    _CoreResolver.add_implicit_resolver(_tag, re.compile(_pattern), _first)


class _CoreConstructor(yaml.constructor.SafeConstructor):
    """Values of the 1.2 core schema, as JavaScript sees them.

    No merge keys (``<<`` is an ordinary key in 1.2, as in the `yaml`
    package), no timestamps, and mapping keys are strings (a JavaScript
    object's keys are).
    """

    def construct_yaml_int(self, node: Any) -> int:
        value = str(self.construct_scalar(node))
        if value.startswith("0o"):
            return int(value, 8)
        if value.startswith("0x"):
            return int(value, 16)
        return int(value)

    def construct_yaml_float(self, node: Any) -> float:
        value = str(self.construct_scalar(node)).lower()
        if value.endswith("inf"):
            return -math.inf if value.startswith("-") else math.inf
        if value.endswith("nan"):
            return math.nan
        return float(value)

    def construct_yaml_bool(self, node: Any) -> bool:
        return str(self.construct_scalar(node)).lower() == "true"

    def flatten_mapping(self, node: Any) -> None:
        return None  # `<<` is a plain key in YAML 1.2

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        # Keys become strings as they are read: `1:` and `true:` are two keys
        # in JavaScript, but 1 == True would merge them in a Python dict.
        mapping: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _js_key(self.construct_object(key_node, deep=deep))
            if not isinstance(key, str):
                problem = "a mapping key must be a plain value, not a list or mapping"
                raise yaml.constructor.ConstructorError(
                    None, None, problem, key_node.start_mark
                )
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


def _js_key(key: Any) -> str | None:
    if key is None:
        return ""
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return str(key)
    if isinstance(key, float):
        if math.isnan(key):
            return "NaN"
        if math.isfinite(key) and key == int(key) and abs(key) < 1e21:
            return str(int(key))
        return {math.inf: "Infinity", -math.inf: "-Infinity"}.get(key, repr(key))
    if isinstance(key, str):
        return key
    return None


for _tag, _method in (
    ("tag:yaml.org,2002:int", _CoreConstructor.construct_yaml_int),
    ("tag:yaml.org,2002:float", _CoreConstructor.construct_yaml_float),
    ("tag:yaml.org,2002:bool", _CoreConstructor.construct_yaml_bool),
):
    _CoreConstructor.add_constructor(_tag, _method)  # type: ignore[type-var]


class _Loader11(
    yaml.reader.Reader,
    yaml.scanner.Scanner,
    yaml.parser.Parser,
    _BoundedComposer,
    yaml.constructor.SafeConstructor,
    yaml.resolver.Resolver,
):
    def __init__(self, stream: str | bytes) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        _BoundedComposer.__init__(self)
        yaml.constructor.SafeConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)


class _Loader12(
    yaml.reader.Reader,
    yaml.scanner.Scanner,
    yaml.parser.Parser,
    _BoundedComposer,
    _CoreConstructor,
    _CoreResolver,
):
    def __init__(self, stream: str | bytes) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        _BoundedComposer.__init__(self)
        _CoreConstructor.__init__(self)
        _CoreResolver.__init__(self)


_LOADERS: Final[dict[Schema, Any]] = {
    Schema.YAML_1_1: _Loader11,
    Schema.YAML_1_2: _Loader12,
}


def compose(text: str | bytes, schema: Schema) -> yaml.Node | None:
    """The node tree of a single-document stream (YAMLError when invalid)."""
    loader = _LOADERS[schema](text)
    try:
        node: yaml.Node | None = loader.get_single_node()
        return node
    finally:
        loader.dispose()


def construct(node: yaml.Node | None, schema: Schema) -> Any:
    """Python data for a node tree composed with the same ``schema``."""
    if node is None:
        return None
    loader = _LOADERS[schema]("")
    try:
        return loader.construct_document(node)
    finally:
        loader.dispose()


def safe_load(text: str | bytes, schema: Schema = Schema.YAML_1_1) -> Any:
    """``yaml.safe_load`` with the alias bound (and the chosen schema)."""
    return construct(compose(text, schema), schema)
