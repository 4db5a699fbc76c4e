"""Compiled vally ToolMatch entries: name/argument/result filters and their
config validation, shared by the ``tool-calls`` grader.

A :class:`Matcher` is immutable once built; matching a call never allocates
beyond the argument lookups. ``command``/``path`` absent on a call whose name
matches is vally's "configuration error" and raises :class:`ArgMissingError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import msgspec

from trajgrade.graders._match import NameMatcher, Pattern
from trajgrade.graders._spec import ConfigBase, ErrorList

if TYPE_CHECKING:
    from trajgrade.events import ToolCall
    from trajgrade.graders._jsliteral import JSRegexError

__all__ = (
    "ArgMissingError",
    "Matcher",
    "ToolMatch",
    "count_text",
    "regex_field",
    "validate",
)


class ToolMatch(ConfigBase):
    """One matcher; a plain string ``s`` in a list is shorthand for ``{name: s}``."""

    name: str
    command: str | None = None
    path: str | None = None
    args: dict[str, str] | None = None
    result: str | None = None
    min_count: int | None = None
    final: bool | None = None
    at_step: int | None = None
    before_step: int | None = None


class ArgMissingError(Exception):
    """``command``/``path`` referenced but absent on a call the entry names."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Matcher:
    """A compiled ToolMatch."""

    __slots__ = (
        "args",
        "at_step",
        "before_step",
        "checks",
        "command",
        "final",
        "label",
        "min_count",
        "name",
        "path",
        "required_args",
        "result",
        "where",
        "windowed",
    )

    def __init__(self, spec: ToolMatch, where: str, timeout: float) -> None:
        self.where = where
        self.label = _label(spec)
        self.name = NameMatcher(
            Pattern(spec.name, field=f"{where}.name", timeout=timeout)
        )
        self.command = _opt(spec.command, f"{where}.command", timeout)
        self.path = _opt(spec.path, f"{where}.path", timeout)
        self.args = tuple(
            (key, Pattern(rx, field=f"{where}.args.{key}", timeout=timeout))
            for key, rx in (spec.args or {}).items()
        )
        self.result = _opt(spec.result, f"{where}.result", timeout)
        self.min_count = spec.min_count if spec.min_count is not None else 1
        self.final = bool(spec.final)
        self.at_step = spec.at_step
        self.before_step = spec.before_step
        self.windowed = spec.at_step is not None or spec.before_step is not None
        strict = tuple(
            (key, pattern)
            for key, pattern in (("command", self.command), ("path", self.path))
            if pattern is not None
        )
        #: Arguments whose absence is a configuration error (command, path).
        self.required_args = tuple(key for key, _ in strict)
        #: (argument, pattern) in evaluation order.
        self.checks = strict + self.args

    def matches_call(self, call: ToolCall) -> bool:
        """Name and every argument filter match (raises for absent command/path)."""
        return self.name(call.name) and (not self.checks or self.matches_args(call))

    def matches_args(self, call: ToolCall) -> bool:
        """The argument filters match; the caller has matched the name."""
        args = call.args or {}
        # Presence first: a tool the entry names must carry command/path,
        # whatever the other filters would say ("configuration error").
        for key in self.required_args:
            value = args.get(key)
            if not isinstance(value, str):
                raise ArgMissingError(self._missing(call, key, value))
        for key, pattern in self.checks:
            value = args.get(key)
            if not isinstance(value, str) or not pattern.search(value):
                return False
        return True

    def _missing(self, call: ToolCall, key: str, value: Any) -> str:
        got = "absent" if value is None else f"a {type(value).__name__}, not a string"
        return (
            f"configuration error: {self.where} filters on '{key}', but call "
            f"{call.call_id or '?'} to {call.name!r} has '{key}' {got}; use "
            f"args: {{{key}: ...}} to skip tools without it, or narrow the name"
        )

    def in_window(self, step: int) -> bool:
        if self.at_step is not None and step != self.at_step:
            return False
        return self.before_step is None or step < self.before_step

    @property
    def window_end(self) -> int | None:
        """The first step at which a matching call can no longer count."""
        if self.at_step is not None:
            return self.at_step + 1
        return self.before_step


def _opt(source: str | None, field: str, timeout: float) -> Pattern | None:
    return None if source is None else Pattern(source, field=field, timeout=timeout)


def _label(spec: ToolMatch) -> str:
    # Patterns are shown as the user wrote them (no repr escaping of backslashes).
    parts = {k: v for k, v in msgspec.structs.asdict(spec).items() if v is not None}
    if len(parts) == 1:
        return f"'{spec.name}'"
    inner = ", ".join(
        f"{k}: '{v}'" if isinstance(v, str) else f"{k}: {v}" for k, v in parts.items()
    )
    return "{" + inner + "}"


def count_text(count: int, m: Matcher) -> str:
    where = ""
    if m.at_step is not None:
        where = f" in step {m.at_step}"
    elif m.before_step is not None:
        where = f" before step {m.before_step}"
    return f"{count} of {m.min_count} matching completed call(s){where}"


_REQUIRED_ONLY: Final = ("min_count", "final", "at_step", "before_step")


def validate(where: str, at: str, spec: ToolMatch, errors: ErrorList) -> None:
    if where != "required":
        for key in _REQUIRED_ONLY:
            value = getattr(spec, key)
            if value is not None:
                errors.add(
                    f"{at}.{key}",
                    f"{key} is only allowed on 'required' entries (got {key}={value!r}); "
                    f"move the entry under 'required' or drop {key}",
                )
    if where == "sequence" and spec.result is not None:
        errors.add(
            f"{at}.result",
            "result is not supported on 'sequence' entries: they match when the tool is "
            "invoked, before its result exists; use a 'required' entry with result instead",
        )
    if spec.min_count is not None and spec.min_count < 1:
        errors.add(f"{at}.min_count", f"min_count must be >= 1 (got {spec.min_count})")
    if spec.at_step is not None and spec.at_step < 0:
        errors.add(
            f"{at}.at_step",
            f"at_step is a 0-based step and must be >= 0 (got {spec.at_step})",
        )
    if spec.before_step is not None and spec.before_step < 1:
        errors.add(
            f"{at}.before_step",
            f"before_step must be >= 1 (got {spec.before_step}); steps are 0-based, so "
            "before_step: 1 means 'in the first step'",
        )
    if (
        spec.at_step is not None
        and spec.before_step is not None
        and spec.at_step >= spec.before_step
    ):
        errors.add(
            f"{at}.at_step",
            f"at_step ({spec.at_step}) must be less than before_step ({spec.before_step}), "
            "otherwise no step satisfies both; drop one of them",
        )


def regex_field(at: str, spec: ToolMatch, exc: JSRegexError) -> str:
    for key in ("name", "command", "path", "result"):
        if getattr(spec, key) == exc.pattern:
            return f"{at}.{key}"
    for key, rx in (spec.args or {}).items():
        if rx == exc.pattern:
            return f"{at}.args.{key}"
    return at
