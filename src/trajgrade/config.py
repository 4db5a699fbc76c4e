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
from collections.abc import Mapping, Sequence
from typing import Any, Final

import msgspec

from trajgrade._digest import blake2b
from trajgrade._locate import (
    Path as _Path,
)
from trajgrade._locate import (
    convert_all,
    duplicate_keys,
    line_map,
    one_line,
    parse_path,
    relocate,
    render,
    yaml_line,
)
from trajgrade.errors import ConfigError, ConfigErrors, Location
from trajgrade.graders import BuildContext, Grader, lookup

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
        msg = f"cannot read config file: {exc.strerror or exc}; check the path given to -c/--config"
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
    except (msgspec.DecodeError, UnicodeDecodeError, yaml.YAMLError) as exc:
        line = yaml_line(exc)
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


_LAYOUTS: Final = (
    "trajgrade/vally: graders: [{type, name?, config}]",
    "letta-evals: graders: {metric: {kind: tool, function, extractor, ...}}",
    "agentv: execution: {evaluators: [{name, type: tool_trajectory, ...}]}",
    "AI GO!: scorers: [{type: function_call_coverage, ...}]",
)


def _read_layout(
    doc: Any, *, name: str, lines: dict[_Path, int], base_dir: str | None
) -> SuiteConfig:
    """Recognise the file's layout and turn its entries into GraderSpecs.

    trajgrade's own layout is vally's ``graders:`` list, whose entries may
    name any grader type (so one file can mix graders of every upstream).
    Each upstream's whole-file layout is accepted as that tool's users write
    it; keys that belong to the upstream tool and not to grading (datasets,
    targets, descriptions) are left alone.
    """
    shell = SuiteConfig(graders=(), source=name, lines=lines, base_dir=base_dir)
    if not isinstance(doc, Mapping):
        got = "an empty file" if doc is None else f"a {type(doc).__name__}"
        msg = f"expected a mapping in one of the layouts: {'; '.join(_LAYOUTS)}, got {got}; see docs/graders.md"
        raise ConfigError(msg, location=shell.locate(()))
    errors: list[ConfigError] = []
    threshold: float | None = None
    if isinstance(doc.get("graders"), list):
        errors.extend(
            ConfigError(
                f"unknown top-level key {k!r}; only 'graders' is recognised in this layout",
                location=shell.locate((str(k),)),
            )
            for k in doc
            if k != "graders"
        )
        specs = _entries(
            [(("graders", i), e) for i, e in enumerate(doc["graders"])],
            shell,
            errors,
            _trajgrade_entry,
        )
    elif isinstance(doc.get("graders"), Mapping):
        specs = _entries(
            [(("graders", k), e) for k, e in doc["graders"].items()],
            shell,
            errors,
            _letta_entry,
        )
    elif isinstance(doc.get("execution"), Mapping):
        execution = doc["execution"]
        evaluators = execution.get("evaluators") or []
        if not isinstance(evaluators, list):
            msg = "execution.evaluators must be a list of evaluators"
            raise ConfigError(msg, location=shell.locate(("execution", "evaluators")))
        specs = _entries(
            [(("execution", "evaluators", i), e) for i, e in enumerate(evaluators)],
            shell,
            errors,
            _agentv_entry,
        )
        t = execution.get("threshold")
        if t is not None:
            if isinstance(t, int | float) and not isinstance(t, bool) and 0 <= t <= 1:
                threshold = float(t)
            else:
                msg = (
                    f"execution.threshold must be a number between 0 and 1 (got {t!r})"
                )
                errors.append(
                    ConfigError(msg, location=shell.locate(("execution", "threshold")))
                )
    elif isinstance(doc.get("scorers"), list):
        specs = _entries(
            [(("scorers", i), e) for i, e in enumerate(doc["scorers"])],
            shell,
            errors,
            _aigo_entry,
        )
    else:
        raise _no_graders(doc, shell)
    if not specs and not errors:
        msg = "no graders configured; add at least one (see `trajgrade graders`)"
        raise ConfigError(msg, location=shell.locate(()))
    # Entry-level problems are reported by compile_suite together with the
    # other graders' errors, so one `trajgrade check` shows all of them.
    return msgspec.structs.replace(
        shell, graders=tuple(specs), threshold=threshold, problems=tuple(errors)
    )


def _no_graders(doc: Mapping[Any, Any], shell: SuiteConfig) -> ConfigError:
    """No layout's top-level key: name the nearest one (`grader:` for `graders:`)."""
    import difflib

    for key in doc:
        close = difflib.get_close_matches(
            str(key), ("graders", "execution", "scorers"), 1
        )
        if close:
            msg = f"no graders found: did you mean `{close[0]}`?"
            return ConfigError(msg, location=shell.locate((str(key),)))
    msg = f"no graders found; expected one of the layouts: {'; '.join(_LAYOUTS)}"
    return ConfigError(msg, location=shell.locate(()))


def _entries(
    raw: Sequence[tuple[Sequence[str | int], Any]],
    shell: SuiteConfig,
    errors: list[ConfigError],
    read: Any,
) -> list[GraderSpec]:
    specs = []
    for at, entry in raw:
        path: _Path = tuple(at)
        if not isinstance(entry, Mapping):
            msg = f"expected a grader entry (a mapping), got {type(entry).__name__}"
            errors.append(ConfigError(msg, location=shell.locate(path)))
            continue
        try:
            fields = dict(entry)
            on_fail = _on_fail(fields.pop("on_fail", None))
            spec = read(fields, path)
        except ConfigError as exc:
            errors.append(
                ConfigError(
                    exc.message,
                    location=shell.locate(
                        (*path, *parse_path("." + (exc.location.field or "")))
                    ),
                )
            )
            continue
        specs.append(
            spec if on_fail is None else msgspec.structs.replace(spec, on_fail=on_fail)
        )
    return specs


def _on_fail(value: Any) -> OnFail | None:
    """The trajgrade-level ``on_fail:`` of an entry (any layout), validated."""
    if value is None:
        return None
    try:
        return OnFail(value)
    except ValueError:
        known = ", ".join(m.value for m in OnFail)
        msg = f"`on_fail` must be one of {known} (got {value!r}); see docs/hooks.md"
        raise ConfigError(msg, location=Location(field="on_fail")) from None


def _string(entry: dict[str, Any], key: str, *, required: bool = True) -> str | None:
    value = entry.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        got = "missing" if value is None else f"{value!r}"
        msg = f"`{key}` must be a non-empty string (got {got})"
        raise ConfigError(msg, location=Location(field=key))
    return value


def _trajgrade_entry(entry: dict[str, Any], path: _Path) -> GraderSpec:
    kind = _string(entry, "type")
    name = _string(entry, "name", required=False)
    config = entry.get("config")
    extra = {k: v for k, v in entry.items() if k not in ("type", "name", "config")}
    if extra and config is not None:
        key = next(iter(extra))
        msg = f"unknown key `{key}` next to `config`; grader options go under `config:`"
        raise ConfigError(msg, location=Location(field=key))
    if config is not None and not isinstance(config, Mapping):
        msg = f"`config` must be a mapping of grader options (got {type(config).__name__})"
        raise ConfigError(msg, location=Location(field="config"))
    if extra:
        # An upstream entry pasted as is ({type: tool_trajectory, mode: ...}).
        return GraderSpec(
            type=str(kind), name=name, config=extra, path=path, inline=True
        )
    return GraderSpec(type=str(kind), name=name, config=dict(config or {}), path=path)


def _letta_entry(entry: dict[str, Any], path: _Path) -> GraderSpec:
    kind = _string(entry, "kind")
    if kind != "tool":
        msg = (
            f"letta-evals grader kind {kind!r} is not supported: trajgrade runs "
            "kind: tool graders (model judges need an LLM); remove this metric or grade it with letta-evals"
        )
        raise ConfigError(msg, location=Location(field="kind"))
    config = {k: v for k, v in entry.items() if k != "kind"}
    return GraderSpec(
        type="letta-tool", name=str(path[-1]), config=config, path=path, inline=True
    )


def _agentv_entry(entry: dict[str, Any], path: _Path) -> GraderSpec:
    kind = _string(entry, "type")
    name = _string(entry, "name")
    config = {k: v for k, v in entry.items() if k not in ("type", "name")}
    return GraderSpec(type=str(kind), name=name, config=config, path=path, inline=True)


def _aigo_entry(entry: dict[str, Any], path: _Path) -> GraderSpec:
    kind = _string(entry, "type")
    name = entry.get("key") or entry.get("display_name")
    config = {k: v for k, v in entry.items() if k not in ("type", "key")}
    return GraderSpec(
        type=str(kind),
        name=name if isinstance(name, str) else None,
        config=config,
        path=path,
        inline=True,
    )


# ------------------------------------------------------------------ compiling
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
            errors.extend(relocate(e, config.locate, cpath) for e in many.errors)
        except ConfigError as exc:
            errors.append(relocate(exc, config.locate, cpath))
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
