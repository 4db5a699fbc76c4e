"""Config files decoded: every error located, every layout recognised.

A config is YAML or JSON in vally's layout, which is also trajgrade's::

    graders:
      - type: tool-calls
        name: no-secrets          # optional; defaults to the type (made unique)
        config:
          disallowed: [{name: view, path: "\\.env$"}]

Validation collects *every* error before raising (``trajgrade check`` prints
them all), each located by file, line and field path. Line numbers come from
the YAML node tree (PyYAML marks); msgspec supplies the field path.

``load_config`` is the one place in the core that reads a file; decoding and
compiling are pure.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

import msgspec

from trajgrade._util.locate import (
    duplicate_keys,
    line_column,
    line_map,
    one_line,
    render,
    yaml_line,
)
from trajgrade.errors import ConfigError, ConfigErrors, Location

if TYPE_CHECKING:
    from trajgrade.config.model import SuiteConfig

__all__ = ("decode_config", "load_config")


def load_config(path: str | os.PathLike[str]) -> SuiteConfig:
    """Read and decode a config file (YAML, or JSON when it ends in ``.json``)."""
    name = os.fspath(path)
    try:
        with open(name, "rb") as f:
            data = f.read()
    except OSError as exc:
        msg = f"cannot read config file: {exc.strerror or exc}; check the path"
        raise ConfigError(msg, location=Location(file=name)) from None
    return decode_config(
        data,
        name=name,
        json=name.endswith(".json"),
        base_dir=os.path.dirname(os.path.abspath(name)),
    )


def decode_config(
    data: bytes | str,
    *,
    name: str = "<config>",
    json: bool = False,
    base_dir: str | None = None,
) -> SuiteConfig:
    """Decode config text into a SuiteConfig.

    Syntax errors and an unrecognisable layout raise ConfigError here; problems
    in single entries are kept in ``problems`` and raised by ``compile_suite``
    together with the graders' own errors.
    """
    import yaml

    from trajgrade.config import _yaml as _yaml
    from trajgrade.config.layouts import read_layout

    nul = data.find(b"\0") if isinstance(data, bytes) else -1
    if nul >= 0:  # YAML and JSON text never has one: a binary file
        msg = (
            f"not a text file (a NUL byte at byte {nul}): "
            "a config is YAML or JSON text; check the path"
        )
        raise ConfigError(msg, location=Location(file=name))
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    node: yaml.Node | None = None
    try:
        if json:
            doc = msgspec.json.decode(text)
            try:  # JSON is YAML 1.2: its node marks give the line numbers
                node = _yaml.compose(text, _yaml.Schema.YAML_1_2)
            except yaml.YAMLError:
                node = None
        else:
            node = _yaml.compose(text, _yaml.Schema.YAML_1_2)
            schema = _schema_of(node)
            if schema is not _yaml.Schema.YAML_1_2:
                node = _yaml.compose(text, schema)
            doc = _yaml.construct(node, schema)
    except yaml.reader.ReaderError as exc:
        # PyYAML names its own buffer and an offset in it ("<unicode
        # string>", position 0): give the file's line and column instead.
        row, column = line_column(text, exc.position)
        msg = (
            f"not valid YAML: character U+{exc.character:04X} (column {column}) "
            "is not allowed in YAML; remove it, or check the path if this is "
            "not a config file"
        )
        raise ConfigError(msg, location=Location(file=name, line=row)) from None
    except (msgspec.DecodeError, UnicodeDecodeError, yaml.YAMLError) as exc:
        line = yaml_line(exc)
        if line is None and isinstance(exc, msgspec.DecodeError):
            # msgspec names the byte: turn it into the line an editor shows.
            at = re.search(r"\(byte (\d+)\)", str(exc))
            if at:
                line = text.encode()[: int(at.group(1))].count(b"\n") + 1
        msg = f"not valid {'JSON' if json else 'YAML'}: {one_line(exc)}; fix the syntax"
        if isinstance(exc, _yaml.AliasLimitError):
            msg = str(exc.problem)
        raise ConfigError(msg, location=Location(file=name, line=line)) from None
    lines = line_map(node)
    repeated = [
        ConfigError(
            f"key `{path[-1]}` is written twice (first on line {first}); YAML keeps only "
            "the last one, so the first would be ignored: merge the two or remove one",
            location=Location(file=name, line=line, field=render(path)),
        )
        for path, first, line in duplicate_keys(node)
    ]
    if repeated:
        raise ConfigErrors(repeated) if len(repeated) > 1 else repeated[0]
    return read_layout(doc, name=name, lines=lines, base_dir=base_dir)


def _schema_of(node: Any) -> Any:
    """The YAML version of the upstream whose layout the file is in.

    agentv and vally (trajgrade's own layout) are TypeScript and read YAML
    1.2; letta-evals reads YAML 1.1 with PyYAML, and so do AI GO! configs
    (a Python tool; its parser is not published, PyYAML is assumed). The
    layout keys are plain words, resolved alike by both versions.
    """
    import yaml

    from trajgrade.config._yaml import Schema

    if isinstance(node, yaml.MappingNode):
        for knode, vnode in node.value:
            key = knode.value if isinstance(knode, yaml.ScalarNode) else None
            if key == "graders" and isinstance(vnode, yaml.MappingNode):
                return Schema.YAML_1_1
            if key == "scorers" and isinstance(vnode, yaml.SequenceNode):
                return Schema.YAML_1_1
    return Schema.YAML_1_2
