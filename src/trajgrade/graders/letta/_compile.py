"""Compiling a letta-tool config: the extractor (and its options), the function.

Names that are not built in go to ``_code`` (``path.py:func`` with
``--allow-code``, or an entry point).

letta-evals reads extractor options with ``config["key"]`` and
``config.get("key", default)`` while grading, so a missing ``pattern``,
``tool_name`` or ``marker`` is a KeyError on every sample and a bad
``group`` an IndexError on the first match. Such a suite can never grade,
so trajgrade reports these when the suite is compiled, each located at its
``extractor_config`` key. What upstream accepts is accepted, quirks included
(``group`` may be a group name; with ``search_all`` and two or more groups it
indexes the findall tuple 0-based, negative indexes too). Options must have
their documented type (``search_all: "false"`` is truthy upstream; here it is
an error). Keys an extractor does not read are warnings, as upstream ignores
them silently.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from trajgrade.errors import ConfigError
from trajgrade.graders.letta import _code as _letta_code
from trajgrade.graders.letta._extract import (
    AfterMarker,
    Custom,
    Extractor,
    First,
    Joined,
    Last,
    MemoryBlock,
    PatternFind,
    ToolArguments,
    ToolOutput,
)
from trajgrade.graders.letta._functions import (
    BUILTIN_FUNCTIONS,
    InvalidPatternError,
    Sample,
    compile_pattern,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    import regex

    from trajgrade.graders._spec import ErrorList

__all__ = ("BUILTIN_EXTRACTORS", "compile_extractor", "compile_function")

#: Built-in extractor -> the extractor_config keys it reads.
_KEYS: Final[dict[str, tuple[str, ...]]] = {
    "last_assistant": (),
    "first_assistant": (),
    "all_assistant": ("separator",),
    "last_turn": ("separator",),
    "pattern": ("pattern", "group", "search_all"),
    "tool_arguments": ("tool_name",),
    "tool_output": ("tool_name",),
    "after_marker": ("marker", "include_marker"),
    "memory_block": ("block_label",),
}
#: Built-in extractor names.
BUILTIN_EXTRACTORS: Final = tuple(_KEYS)


def compile_extractor(
    name: str, options: dict[str, Any], errors: ErrorList, context: Any
) -> Extractor | None:
    """The extractor ``name`` with its options; None after recording errors."""
    if name in _KEYS:
        return _builtin(name, options, errors, context.warn, context.regex_timeout)
    try:
        found = _resolve(name, "extractor", context)
    except ConfigError as exc:
        errors.errors.append(exc)
        return None
    if found is None:
        known = ", ".join(BUILTIN_EXTRACTORS)
        errors.add(
            "extractor",
            f"Unknown extractor: {name}; built-in extractors: {known}, or `path.py:func` (with --allow-code), or a `{_letta_code.EXTRACTOR_GROUP}` entry point",
        )
        return None
    return Custom(found, name, options)


def compile_function(
    name: str, errors: ErrorList, context: Any
) -> Callable[[Sample, str], Any] | None:
    """The grading function ``name``; None after recording errors."""
    factory = BUILTIN_FUNCTIONS.get(name)
    if factory is not None:
        return factory(context.regex_timeout)
    try:
        found: Callable[[Sample, str], Any] | None = _resolve(name, "grader", context)
    except ConfigError as exc:
        errors.errors.append(exc)
        return None
    if found is None:
        known = ", ".join(BUILTIN_FUNCTIONS)
        errors.add(
            "function",
            f"Grader function '{name}' not found in registry; built-in functions: {known}, or `path.py:func` (with --allow-code), or a `{_letta_code.FUNCTION_GROUP}` entry point",
        )
    return found


def _resolve(spec: str, role: _letta_code.Role, context: Any) -> Any:
    return _letta_code.load(
        spec, role, allow_code=context.allow_code, base_dir=context.base_dir
    )


class _Options:
    """Typed reads of one extractor_config, recording every problem."""

    def __init__(self, name: str, config: dict[str, Any], errors: ErrorList) -> None:
        self.name, self.config, self.errors = name, config, errors

    def get(
        self,
        key: str,
        kinds: tuple[type, ...],
        default: Any = None,
        *,
        required: bool = False,
    ) -> Any:
        field = f"extractor_config.{key}"
        if key not in self.config:
            if required:
                self.errors.add(
                    field,
                    f"missing required key `{key}` in extractor_config: the {self.name} extractor reads it (a KeyError: '{key}' in letta-evals)",
                )
            return default
        value = self.config[key]
        # bool is an int subclass; `group: true` is not a group number.
        if not isinstance(value, kinds) or (
            isinstance(value, bool) and bool not in kinds
        ):
            what = " or ".join(k.__name__ for k in kinds)
            self.errors.add(field, f"`{key}` must be a {what} (got {value!r})")
            return default
        return value


def _builtin(
    name: str,
    config: dict[str, Any],
    errors: ErrorList,
    warn: Callable[[str, str], None],
    timeout: float,
) -> Extractor | None:
    """Compile built-in extractor ``name``; None when ``config`` has errors
    (each recorded in ``errors``)."""
    for key in config:
        if key not in _KEYS[name]:
            reads = ", ".join(_KEYS[name]) or "no keys"
            warn(
                f"extractor_config.{key}",
                f"unknown key {key!r} is ignored by the {name} extractor (it reads {reads})",
            )
    before = len(errors.errors)
    opt = _Options(name, config, errors)
    extractor: Extractor | None
    if name == "last_assistant":
        extractor = Last()
    elif name == "first_assistant":
        extractor = First()
    elif name in ("all_assistant", "last_turn"):
        separator = opt.get("separator", (str,), "\n")
        extractor = Joined(separator, last_turn_only=name == "last_turn")
    elif name == "pattern":
        extractor = _pattern(opt, timeout)
    elif name in ("tool_arguments", "tool_output"):
        tool = opt.get("tool_name", (str,), "", required=True)
        extractor = (
            ToolArguments(tool) if name == "tool_arguments" else ToolOutput(tool)
        )
    elif name == "after_marker":
        marker = opt.get("marker", (str,), "", required=True)
        extractor = AfterMarker(marker, opt.get("include_marker", (bool,), False))
    else:
        label = config.get("block_label")
        if not isinstance(label, str) or not label:
            errors.add(
                "extractor_config.block_label",
                "memory_block extractor requires 'block_label' in config (the label of a memory block, e.g. human)",
            )
        extractor = MemoryBlock(str(label))
    return extractor if len(errors.errors) == before else None


def _pattern(opt: _Options, timeout: float) -> Extractor | None:
    source = opt.get("pattern", (str,), None, required=True)
    group = opt.get("group", (int, str), 0)
    search_all = opt.get("search_all", (bool,), False)
    if source is None:
        return None
    try:
        compiled = compile_pattern(source)
    except InvalidPatternError as exc:
        opt.errors.add("extractor_config.pattern", f"invalid regex {source!r}: {exc}")
        return None
    problem = _group_problem(compiled, group, search_all)
    if problem is not None:
        opt.errors.add("extractor_config.group", problem)
        return None
    return PatternFind(source, compiled, group, search_all, timeout)


def _group_problem(
    compiled: regex.Pattern[str], group: int | str, search_all: bool
) -> str | None:
    """Why ``group`` would fail on the first match upstream, or None."""
    n = compiled.groups
    if search_all:
        if n < 2:
            return None  # findall yields plain strings: group is not used
        if isinstance(group, int) and -n <= group < n:
            return None
        return f"with search_all, group indexes each match's tuple of {n} groups 0-based (a letta-evals quirk), so it must be an integer from 0 to {n - 1} (got {group!r})"
    if isinstance(group, str):
        if group in compiled.groupindex:
            return None
        return f"the pattern has no group named {group!r}"
    if 0 <= group <= n:
        return None
    return f"group {group} does not exist: the pattern has {n} capture group(s), so use 0 to {n} (0 is the whole match)"
