"""Config files: decode, validate, locate every error, compile a Suite.

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

import enum
import os
import re
from typing import TYPE_CHECKING, Any, Final

import msgspec

from trajgrade._digest import blake2b
from trajgrade._locate import (
    Path as _Path,
)
from trajgrade._locate import (
    convert_all,
    duplicate_keys,
    line_column,
    line_map,
    one_line,
    parse_path,
    relocate,
    render,
    yaml_line,
)
from trajgrade.errors import ConfigError, ConfigErrors, Location
from trajgrade.graders import BuildContext, Grader, lookup

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = (
    "ConfigWarning",
    "GraderSpec",
    "OnFail",
    "Suite",
    "SuiteConfig",
    "compile_suite",
    "decode_config",
    "default_on_fail",
    "load_config",
    "load_suite",
)


class OnFail(enum.StrEnum):
    """What a failed verdict of a grader should do to a live agent (``on_fail:``).

    A trajgrade-level key of every grader entry, in every layout. Omitted, it
    is ``abort`` for metric thresholds and ``cost-budget`` (budgets: the run
    is over) and ``deny``
    for every other type (one call broke the policy: refuse that call).
    """

    #: End the run: hooks answer ``continue: false``; ``trajgrade run`` stops the agent.
    ABORT = "abort"
    #: Refuse the offending call; the wrapper, which cannot refuse one call, stops the agent.
    DENY = "deny"
    #: Only write the verdict: no hook decision, no stop, no --signal/--fail-fast.
    REPORT = "report"
    #: Shadow mode: the call runs; the decision is reported (to the model and
    #: user where the host can show it, to logs and the decision stream).
    WARN = "warn"
    #: Ask the user to confirm the call where the host supports it (Claude
    #: Code); hosts that refuse ``ask`` get a deny.
    ASK = "ask"


#: Grader types whose failure means the run is spent, not one bad call.
_ABORT_BY_DEFAULT: Final = frozenset(
    {
        "token-budget",
        "tool-call-count",
        "turn-count",
        "error-count",
        "wall-time",
        "cost-budget",
    }
)


def default_on_fail(kind: str) -> OnFail:
    """The ``on_fail`` of a grader type when its entry names none."""
    return OnFail.ABORT if kind in _ABORT_BY_DEFAULT else OnFail.DENY


class GraderSpec(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One entry of ``graders:`` as written."""

    type: str
    #: ``config:`` may be left empty in YAML (null); it then means ``{}``.
    config: dict[str, Any] | None = None
    name: str | None = None
    #: Where the entry sits in the file (for messages).
    path: _Path = ()
    #: Options sit in the entry itself (upstream layouts), not under ``config``.
    inline: bool = False
    #: The entry's ``on_fail:`` (None: the type's default, see :class:`OnFail`).
    on_fail: OnFail | None = None


class SuiteConfig(msgspec.Struct, frozen=True, kw_only=True):
    """A decoded (not yet compiled) config file."""

    graders: tuple[GraderSpec, ...]
    #: The file it came from, or a label such as ``<string>``.
    source: str = "<config>"
    #: Field path -> 1-based line, from the YAML node tree.
    lines: dict[_Path, int] = msgspec.field(default_factory=dict)
    base_dir: str | None = None
    #: Suite-wide pass threshold from the layout (agentv ``execution.threshold``).
    threshold: float | None = None
    #: Problems found while reading the layout; compile_suite raises them
    #: together with every grader's own errors.
    problems: tuple[ConfigError, ...] = ()

    def locate(self, path: Sequence[str | int]) -> Location:
        """The Location of a field path (nearest enclosing line)."""
        p = tuple(path)
        line = None
        while True:
            line = self.lines.get(p)
            if line is not None or not p:
                break
            p = p[:-1]
        return Location(file=self.source, line=line, field=render(tuple(path)) or None)


class ConfigWarning(msgspec.Struct, frozen=True):
    """A non-fatal config problem (what the upstream tool skips with a warning)."""

    message: str
    location: Location

    def __str__(self) -> str:
        where = str(self.location)
        return f"{where}: {self.message}" if where else self.message


class Suite:
    """Compiled graders, shared by every trace. Immutable once built."""

    __slots__ = ("fingerprint", "graders", "on_fail", "source", "warnings")

    def __init__(
        self,
        graders: Sequence[Grader[Any]],
        *,
        fingerprint: str,
        source: str,
        warnings: Sequence[ConfigWarning] = (),
        on_fail: Mapping[str, OnFail] | None = None,
    ) -> None:
        self.graders: tuple[Grader[Any], ...] = tuple(graders)
        #: Grader name (``Verdict.grader``) -> what its failure should do; every
        #: grader has an entry (its type's default when the config names none).
        self.on_fail: dict[str, OnFail] = {
            g.name: default_on_fail(g.kind) for g in self.graders
        }
        self.on_fail.update(on_fail or {})
        #: Problems that did not stop compilation (`trajgrade check` prints them).
        self.warnings: tuple[ConfigWarning, ...] = tuple(warnings)
        #: Hash of the normalised grader specs; checkpoints from another config
        #: are refused by comparing it.
        self.fingerprint = fingerprint
        self.source = source

    def __repr__(self) -> str:
        names = ", ".join(g.name for g in self.graders)
        return f"Suite({names})"


# ------------------------------------------------------------------ decoding
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

    from trajgrade import _yaml
    from trajgrade._config_layouts import _read_layout

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
    return _read_layout(doc, name=name, lines=lines, base_dir=base_dir)


def _schema_of(node: Any) -> Any:
    """The YAML version of the upstream whose layout the file is in.

    agentv and vally (trajgrade's own layout) are TypeScript and read YAML
    1.2; letta-evals reads YAML 1.1 with PyYAML, and so do AI GO! configs
    (a Python tool; its parser is not published, PyYAML is assumed). The
    layout keys are plain words, resolved alike by both versions.
    """
    import yaml

    from trajgrade._yaml import Schema

    if isinstance(node, yaml.MappingNode):
        for knode, vnode in node.value:
            key = knode.value if isinstance(knode, yaml.ScalarNode) else None
            if key == "graders" and isinstance(vnode, yaml.MappingNode):
                return Schema.YAML_1_1
            if key == "scorers" and isinstance(vnode, yaml.SequenceNode):
                return Schema.YAML_1_1
    return Schema.YAML_1_2


# ------------------------------------------------------------------ compiling
def _besides(
    structural: list[ConfigError], semantic: list[ConfigError]
) -> list[ConfigError]:
    """The build's errors that are not echoes of a structural one: the build
    ran without each key whose value was wrong, so a complaint at that key,
    or naming it ("give repeats or ping_pong" after `ping_pong: 3`), is about
    its absence, which the structural error already explains."""
    if not structural:
        return semantic
    keys = {e.location.field.rsplit(".", 1)[-1] for e in structural if e.location.field}
    words = (
        re.compile(r"\b(?:" + "|".join(map(re.escape, keys)) + r")\b") if keys else None
    )
    return [
        e
        for e in semantic
        if words is None
        or not (
            (e.location.field or "").rsplit(".", 1)[-1] in keys
            or words.search(e.message)
        )
    ]


def compile_suite(config: SuiteConfig, *, context: BuildContext | None = None) -> Suite:
    """Validate every grader's config and compile it; all errors at once."""
    context = context or BuildContext(base_dir=config.base_dir)
    if context.threshold is None:
        context.threshold = config.threshold
    errors: list[ConfigError] = list(config.problems)
    warnings: list[ConfigWarning] = []
    graders: list[Grader[Any]] = []
    on_fail: dict[str, OnFail] = {}
    used: set[str] = set()
    explicit = {s.name for s in config.graders if s.name}
    for spec in config.graders:
        try:
            gtype = lookup(spec.type)
        except ConfigError as exc:
            errors.append(
                ConfigError(exc.message, location=config.locate((*spec.path, "type")))
            )
            continue
        cpath: _Path = spec.path if spec.inline else (*spec.path, "config")
        cfg, structural = convert_all(
            spec.config or {}, gtype.config_type, config.locate, cpath
        )
        errors.extend(structural)
        if cfg is None:
            continue
        if spec.name:
            name = spec.name
            if name in used:
                errors.append(
                    ConfigError(
                        f"grader name {name!r} is used twice; names must be unique",
                        location=config.locate((*spec.path, "name")),
                    )
                )
                continue
        else:
            # type, type#2, … skipping names given explicitly anywhere in the file
            name, n = spec.type, 1
            while name in used or name in explicit:
                n += 1
                name = f"{spec.type}#{n}"
        used.add(name)
        context.warnings.clear()
        try:
            grader = gtype.build(cfg, name=name, context=context)
            if not structural:
                graders.append(grader)
                on_fail[name] = spec.on_fail or default_on_fail(gtype.kind)
                _mark(grader, on_fail[name])
        except ConfigErrors as many:
            errors.extend(
                _besides(
                    structural, [relocate(e, config.locate, cpath) for e in many.errors]
                )
            )
        except ConfigError as exc:
            errors.extend(_besides(structural, [relocate(exc, config.locate, cpath)]))
        for field, message in context.warnings:
            rel = parse_path("." + field) if field else ()
            warnings.append(ConfigWarning(message, config.locate((*cpath, *rel))))
        context.warnings.clear()
    if errors:
        raise ConfigErrors(errors) if len(errors) > 1 else errors[0]
    return Suite(
        graders,
        fingerprint=_fingerprint(config),
        source=config.source,
        warnings=warnings,
        on_fail=on_fail,
    )


def _mark(grader: Grader[Any], on_fail: OnFail) -> None:
    """Also expose ``on_fail`` on the compiled grader where it takes attributes
    (``Suite.on_fail`` is the canonical place: a plugin grader may refuse)."""
    try:
        grader.on_fail = on_fail  # type: ignore[attr-defined]
    except (AttributeError, TypeError):
        pass


def load_suite(
    path: str | os.PathLike[str], *, context: BuildContext | None = None
) -> Suite:
    """``compile_suite(load_config(path))``."""
    config = load_config(path)
    if context is not None and context.base_dir is None:
        context.base_dir = config.base_dir
    return compile_suite(config, context=context)


def _fingerprint(config: SuiteConfig) -> str:
    canon = [[s.type, s.name, s.config] for s in config.graders]
    return blake2b(
        msgspec.json.encode(canon, order="sorted"), digest_size=8
    ).hexdigest()
