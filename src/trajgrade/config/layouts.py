"""Recognising a config file's layout and reading its grader entries.

trajgrade reads four whole-file layouts as each upstream's users write them:
vally's ``graders:`` list (trajgrade's own, whose entries may name any grader
type), letta-evals' ``graders:`` mapping, agentv's ``execution.evaluators``
and AI GO!'s ``scorers``. Each entry becomes a :class:`GraderSpec` located by
field path; problems in single entries are kept for ``compile_suite``.
Pure: called by :func:`trajgrade.config.decode.decode_config` on the decoded document.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import msgspec

from trajgrade._util.locate import (
    Path as _Path,
)
from trajgrade._util.locate import (
    parse_path,
)
from trajgrade.config.model import GraderSpec, OnFail, SuiteConfig
from trajgrade.errors import ConfigError, Location

_LAYOUTS: Final = (
    "trajgrade/vally: graders: [{type, name?, config}]",
    "letta-evals: graders: {metric: {kind: tool, function, extractor, ...}}",
    "agentv: execution: {evaluators: [{name, type: tool_trajectory, ...}]}",
    "AI GO!: scorers: [{type: function_call_coverage, ...}]",
)


__all__ = ("read_layout",)


def read_layout(
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
    specs, threshold = _layout_entries(doc, shell, errors)
    if not specs and not errors:
        msg = "no graders configured; add at least one (see `trajgrade graders`)"
        raise ConfigError(msg, location=shell.locate(()))
    # Entry-level problems are reported by compile_suite together with the
    # other graders' errors, so one `trajgrade check` shows all of them.
    return msgspec.structs.replace(
        shell, graders=tuple(specs), threshold=threshold, problems=tuple(errors)
    )


def _layout_entries(
    doc: Mapping[Any, Any], shell: SuiteConfig, errors: list[ConfigError]
) -> tuple[list[GraderSpec], float | None]:
    """The grader entries of the layout the top-level key names, and the
    suite-wide threshold (agentv's); entry problems go to ``errors``."""
    graders = doc.get("graders")
    if PROTECT in doc and (graders is None or isinstance(graders, list)):
        protect = [_protect_entry(doc[PROTECT], shell, errors)]
        graders = graders or []
    else:
        protect = []
    if isinstance(graders, list):
        errors.extend(
            ConfigError(
                f"unknown top-level key {k!r}; only 'graders' and 'protect' are recognised in this layout",
                location=shell.locate((str(k),)),
            )
            for k in doc
            if k not in ("graders", PROTECT)
        )
        entries = [(("graders", i), e) for i, e in enumerate(graders)]
        specs = _entries(entries, shell, errors, _trajgrade_entry)
        return [s for s in protect if s is not None] + specs, None
    if isinstance(graders, Mapping):
        named = [(("graders", k), e) for k, e in graders.items()]
        return _entries(named, shell, errors, _letta_entry), None
    if isinstance(doc.get("execution"), Mapping):
        return _agentv_layout(doc["execution"], shell, errors)
    if isinstance(doc.get("scorers"), list):
        scorers = [(("scorers", i), e) for i, e in enumerate(doc["scorers"])]
        return _entries(scorers, shell, errors, _aigo_entry), None
    raise _no_graders(doc, shell)


#: The top-level key of the guard's policy section (docs/guard-layers.md).
PROTECT: Final = "protect"


def _protect_entry(
    section: Any, shell: SuiteConfig, errors: list[ConfigError]
) -> GraderSpec | None:
    """``protect:`` as the ``protect`` grader's spec (its options inline,
    so that an error names ``protect.<field>``)."""
    if section is None:
        section = {}
    if not isinstance(section, Mapping):
        msg = f"`protect` must be a mapping (got {type(section).__name__}); see docs/guard-layers.md"
        errors.append(ConfigError(msg, location=shell.locate((PROTECT,))))
        return None
    return GraderSpec(
        type=PROTECT, name=PROTECT, config=dict(section), path=(PROTECT,), inline=True
    )


def _agentv_layout(
    execution: Mapping[Any, Any], shell: SuiteConfig, errors: list[ConfigError]
) -> tuple[list[GraderSpec], float | None]:
    """agentv's ``execution:``: its evaluators, and its ``threshold``."""
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
    return specs, _threshold(execution.get("threshold"), shell, errors)


def _threshold(t: Any, shell: SuiteConfig, errors: list[ConfigError]) -> float | None:
    """``execution.threshold``: a number between 0 and 1, else an error kept."""
    if t is None:
        return None
    if isinstance(t, int | float) and not isinstance(t, bool) and 0 <= t <= 1:
        return float(t)
    msg = f"execution.threshold must be a number between 0 and 1 (got {t!r})"
    errors.append(ConfigError(msg, location=shell.locate(("execution", "threshold"))))
    return None


def _no_graders(doc: Mapping[Any, Any], shell: SuiteConfig) -> ConfigError:
    """No layout's top-level key: name the nearest one (`grader:` for `graders:`)."""
    import difflib

    wanted = {
        "graders": "a list of graders [{type, name?, config}] (or letta-evals' mapping)",
        "execution": "a mapping with `evaluators:` (agentv)",
        "scorers": "a list of scorers (AI GO!)",
    }
    for key, what in wanted.items():
        if key in doc:  # the right key with the wrong kind of value
            got = "nothing" if doc[key] is None else type(doc[key]).__name__
            msg = f"`{key}` must be {what}, got {got}; see docs/graders.md"
            return ConfigError(msg, location=shell.locate((key,)))
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
            message = _message(fields.pop("message", None))
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
        specs.append(msgspec.structs.replace(spec, on_fail=on_fail, message=message))
    return specs


#: Characters a ``message:`` may hold: it is shown to the model in one line.
MESSAGE_MAX: Final = 1000


def message_problem(value: Any) -> str | None:
    """Why a ``message:`` (a grader entry's or a rule's) is unusable, or None."""
    if not isinstance(value, str) or not value.strip():
        got = "nothing" if value is None else repr(value)
        return f"`message` must be a non-empty string (got {got}): the text the model and the user are told"
    if len(value) > MESSAGE_MAX:
        return f"`message` is {len(value)} characters long; keep it under {MESSAGE_MAX} (the model reads it on every refusal)"
    return None


def _message(value: Any) -> str | None:
    """The trajgrade-level ``message:`` of an entry (any layout), validated."""
    if value is None:
        return None
    problem = message_problem(value)
    if problem is not None:
        raise ConfigError(problem, location=Location(field="message"))
    return " ".join(str(value).split())


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
    if extra and config is None:
        import difflib

        for key in extra:
            if difflib.get_close_matches(str(key), ("config",), 1, 0.7):
                # Else read as an inline entry: every option "unknown".
                msg = f"unknown key `{key}`; did you mean `config`?"
                raise ConfigError(msg, location=Location(field=key))
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
