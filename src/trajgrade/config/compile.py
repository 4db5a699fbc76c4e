"""Compiling a decoded config into a :class:`~trajgrade.config.model.Suite`:
every grader's config validated and built, all errors at once."""

from __future__ import annotations

import posixpath
import re
from typing import TYPE_CHECKING, Any

import msgspec

from trajgrade._util.digest import blake2b
from trajgrade._util.locate import Path as _Path
from trajgrade._util.locate import convert_all, parse_path, relocate
from trajgrade.config.decode import load_config
from trajgrade.config.layouts import PROTECT
from trajgrade.config.model import (
    ConfigWarning,
    GraderSpec,
    OnFail,
    Suite,
    SuiteConfig,
    default_on_fail,
)
from trajgrade.errors import ConfigError, ConfigErrors
from trajgrade.graders import BuildContext, Grader, GraderType, lookup

if TYPE_CHECKING:
    import os

__all__ = ("compile_suite", "load_suite")


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
    compilation = _Compilation(config, context)
    specs = config.graders
    guarding = _guards_itself(config, context)
    if guarding and not any(s.type == PROTECT for s in specs):
        # A guard mode protects itself even without a protect: section.
        specs = (_implicit_protect(), *specs)
    for spec in specs:
        compilation.add(spec)
    return compilation.suite()


def _guards_itself(config: SuiteConfig, context: BuildContext) -> bool:
    """Whether the guard's own rules apply (a guard mode, or a policy with
    a ``protect`` grader); the policy file then joins the guard's files."""
    if context.world is None and not any(s.type == PROTECT for s in config.graders):
        return False
    source = config.source
    if config.base_dir is not None and not source.startswith("<"):
        policy = posixpath.join(config.base_dir, posixpath.basename(source))
        if policy not in context.guard_files:
            context.guard_files = (*context.guard_files, policy)
    return context.world is not None


def _implicit_protect() -> GraderSpec:
    from trajgrade.graders.protect.grader import IMPLICIT

    return GraderSpec(type=PROTECT, config=dict(IMPLICIT), path=(PROTECT,), inline=True)


class _Compilation:
    """One ``compile_suite`` run: the graders built so far, the names they
    took, and every error and warning met on the way."""

    def __init__(self, config: SuiteConfig, context: BuildContext) -> None:
        self.config = config
        self.context = context
        self.errors: list[ConfigError] = list(config.problems)
        self.warnings: list[ConfigWarning] = []
        self.graders: list[Grader[Any]] = []
        self.on_fail: dict[str, OnFail] = {}
        self.messages: dict[str, str] = {}
        self.rule_lines: dict[str, Any] = {}
        self._used: set[str] = set()
        #: Names given explicitly anywhere in the file (never generated).
        self._explicit = {s.name for s in config.graders if s.name}

    def add(self, spec: GraderSpec) -> None:
        """Look up, validate, name and build one entry; its errors are kept."""
        config = self.config
        try:
            gtype = lookup(spec.type)
        except ConfigError as exc:
            self.errors.append(
                ConfigError(exc.message, location=config.locate((*spec.path, "type")))
            )
            return
        cpath: _Path = spec.path if spec.inline else (*spec.path, "config")
        options = dict(spec.config or {})
        if not spec.inline:
            self.errors.extend(_misplaced(options, gtype, config, cpath))
        cfg, structural = convert_all(options, gtype.config_type, config.locate, cpath)
        self.errors.extend(structural)
        if cfg is None:
            return
        name = self._name(spec)
        if name is not None:
            self._build(gtype, cfg, spec, name, cpath, structural)

    def _name(self, spec: GraderSpec) -> str | None:
        """The entry's grader name, taken; None (an error kept) when its
        explicit name is taken already."""
        if spec.name:
            name = spec.name
            if name in self._used:
                self.errors.append(
                    ConfigError(
                        f"grader name {name!r} is used twice; names must be unique",
                        location=self.config.locate((*spec.path, "name")),
                    )
                )
                return None
        else:
            # type, type#2, … skipping names given explicitly anywhere in the file
            name, n = spec.type, 1
            while name in self._used or name in self._explicit:
                n += 1
                name = f"{spec.type}#{n}"
        self._used.add(name)
        return name

    def _build(
        self,
        gtype: GraderType,
        cfg: Any,
        spec: GraderSpec,
        name: str,
        cpath: _Path,
        structural: list[ConfigError],
    ) -> None:
        """Build the grader (kept only when its config had no structural
        error), with its errors and warnings located in the file."""
        config, context = self.config, self.context
        context.warnings.clear()
        try:
            grader = gtype.build(cfg, name=name, context=context)
            if not structural:
                self.graders.append(grader)
                self.on_fail[name] = spec.on_fail or default_on_fail(gtype.kind)
                _mark(grader, self.on_fail[name])
                if spec.message is not None:
                    self.messages[name] = spec.message
                self.rule_lines[name] = _RuleLines(config, cpath)
        except ConfigErrors as many:
            self.errors.extend(
                _besides(
                    structural, [relocate(e, config.locate, cpath) for e in many.errors]
                )
            )
        except ConfigError as exc:
            self.errors.extend(
                _besides(structural, [relocate(exc, config.locate, cpath)])
            )
        for field, message in context.warnings:
            rel = parse_path("." + field) if field else ()
            self.warnings.append(ConfigWarning(message, config.locate((*cpath, *rel))))
        context.warnings.clear()

    def suite(self) -> Suite:
        """The compiled Suite; every error met, raised together."""
        errors = self.errors
        if errors:
            raise ConfigErrors(errors) if len(errors) > 1 else errors[0]
        config = self.config
        return Suite(
            self.graders,
            fingerprint=_fingerprint(config),
            source=config.source,
            warnings=self.warnings,
            on_fail=self.on_fail,
            messages=self.messages,
            rule_lines=self.rule_lines,
            uses_project_path=any(
                _mentions(s.config, "project_path") for s in config.graders
            ),
        )


def _mentions(value: Any, key: str, depth: int = 0) -> bool:
    """Whether a config holds ``key`` as a mapping key at any depth."""
    if depth > 32:
        return False
    if isinstance(value, dict):
        return key in value or any(_mentions(v, key, depth + 1) for v in value.values())
    if isinstance(value, list):
        return any(_mentions(v, key, depth + 1) for v in value)
    return False


class _RuleLines:
    """The policy line of a grader's rule, by the rule's name relative to
    the grader's config (``disallowed[0]``, ``max_usd``): the entry's own
    line for a name that is not a field path (``tool-calls``)."""

    __slots__ = ("_config", "_cpath")

    def __init__(self, config: SuiteConfig, cpath: _Path) -> None:
        self._config = config
        self._cpath = cpath

    def __call__(self, rule: str) -> int | None:
        try:
            rel = parse_path("." + rule) if rule else ()
        except ValueError:  # (msgspec's DecodeError of a quoted key too)
            rel = ()
        return self._config.locate((*self._cpath, *rel)).line


#: Keys of a ``graders:`` entry itself (beside ``type:``), not grader options.
_ENTRY_KEYS = frozenset(GraderSpec.__struct_fields__) - {"config", "path", "inline"}


def _misplaced(
    options: dict[str, Any], gtype: GraderType, config: SuiteConfig, cpath: _Path
) -> list[ConfigError]:
    """Entry keys written under ``config:`` (``on_fail:`` one level too deep):
    removed from ``options`` and reported with the fix, to move them up,
    instead of msgspec's "unknown field; remove it"."""
    own = set(getattr(gtype.config_type, "__struct_fields__", ()))
    errors = []
    for key in sorted(k for k in options if k in _ENTRY_KEYS and k not in own):
        del options[key]
        errors.append(
            ConfigError(
                f"`{key}` belongs to the grader entry, not to its options: "
                f"move it up one level, out of `config:`, beside `type:`",
                location=config.locate((*cpath, key)),
            )
        )
    return errors


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
