"""Compiled ToolMatch entries: name/kind/argument/result filters and their
config validation, shared by the ``tool-calls`` grader and the guard rules.

vally's fields (``name``, ``command``, ``path``, ``args``, ``result``, ...)
plus trajgrade's agent-neutral ones (docs/guard-matching.md):

* ``kind`` -- the tool's kind from the per-agent tables (``_agents``):
  ``shell``, ``read``, ``write``, ``edit``, ...; with ``name``, both must hold.
* ``command``, ``path``, ``url`` filter the call's argument *views*
  (``_views``): Claude Code's ``file_path``, Codex's ``cmd`` argv, every path
  of an ``apply_patch``, ... An unknown tool's view is the argument of that
  name, which is vally's lookup. Paths are normalised.
* ``program`` -- a regex on each program the shell command runs (``_shell``).
* ``capability`` -- a capability (or a list) one of the command's programs
  has, from the shipped program table; the test itself is the protect
  package's (:mod:`trajgrade.graders.protect.capability_filter`), handed to
  :class:`Matcher` by the rule that builds it, since matching sits below it.

vally's rule stands for every view: a ``command``/``path``/``url``/
``program`` filter on a call the entry selects that has no such view is a
configuration error (:class:`ArgMissingError`, an ``error`` verdict).

A :class:`Matcher` is immutable once built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Protocol

import msgspec

from trajgrade.graders._spec import ConfigBase, ErrorList
from trajgrade.graders.matching._agents import (
    KINDS,
    UNION,
    kinds_of_name,
    narrow_advice,
)
from trajgrade.graders.matching._match import NameMatcher, Pattern
from trajgrade.graders.matching._views import call_kind, project_paths, view_of

if TYPE_CHECKING:
    from trajgrade.events import ToolCall
    from trajgrade.graders.matching._jsliteral import JSRegexError

__all__ = (
    "ArgMissingError",
    "CapabilityTest",
    "Matcher",
    "ToolMatch",
    "count_text",
    "regex_field",
    "validate",
)


class ToolMatch(ConfigBase):
    """One matcher; a plain string ``s`` in a list is shorthand for ``{name: s}``.

    At least one of ``name`` and ``kind`` is given."""

    name: str | None = None
    kind: str | list[str] | None = None
    command: str | None = None
    path: str | None = None
    #: A regex on each path relative to the project root (the call's
    #: ``cwd``: a hook payload's, a log's recorded one, ``--project-root``):
    #: ``^(?!src/)`` is "outside src/". A relative path is taken as it is.
    project_path: str | None = None
    url: str | None = None
    program: str | None = None
    capability: str | list[str] | None = None
    args: dict[str, str] | None = None
    result: str | None = None
    min_count: int | None = None
    final: bool | None = None
    at_step: int | None = None
    before_step: int | None = None
    #: What the model and the user are told when this entry refuses a call
    #: or fails the trace (trajgrade's addition to every layout's matchers).
    message: str | None = None


#: The view filters, in evaluation order (``program`` reads ``command``,
#: ``project_path`` the paths).
VIEW_FILTERS: Final = ("command", "path", "project_path", "url", "program")


#: The view a filter reads when it is not its own name.
_READS: Final = {"program": "command", "project_path": "path"}


class ArgMissingError(Exception):
    """A view filter on a call the entry selects that has no such view."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class CapabilityTest(Protocol):
    """Whether a shell command starts a program with one of an entry's
    capabilities (an unknown program as the entry's side says)."""

    def __call__(self, command: str) -> bool: ...


def capabilities_named(spec: ToolMatch) -> tuple[str, ...]:
    """The capabilities a spec names (empty: no ``capability``)."""
    if spec.capability is None:
        return ()
    return (
        (spec.capability,)
        if isinstance(spec.capability, str)
        else tuple(spec.capability)
    )


def kinds_of(spec: ToolMatch) -> frozenset[str]:
    """The kinds a spec names (empty: no ``kind``)."""
    if spec.kind is None:
        return frozenset()
    return frozenset((spec.kind,) if isinstance(spec.kind, str) else spec.kind)


class _Selector:
    """Name regex and kind over tool names, memoised per name."""

    __slots__ = ("_cache", "kinds", "pattern")

    def __init__(self, pattern: NameMatcher | None, kinds: frozenset[str]) -> None:
        self.pattern = pattern
        self.kinds = kinds
        self._cache: dict[str, bool] = {}

    def __call__(self, name: str) -> bool:
        hit = self._cache.get(name)
        if hit is None:
            hit = (self.pattern is None or self.pattern(name)) and (
                not self.kinds or bool(self.kinds & kinds_of_name(name))
            )
            if len(self._cache) < 4096:
                self._cache[name] = hit
        return hit


class Matcher:
    """A compiled ToolMatch.

    ``unreadable_matches``: whether a shell command whose programs cannot all
    be read matches a ``program`` filter. True (fail closed) for rules that
    deny or limit; False where a match is credit (``required``).
    """

    __slots__ = (
        "args",
        "at_step",
        "before_step",
        "capability",
        "checks",
        "command",
        "final",
        "kinds",
        "label",
        "message",
        "min_count",
        "name",
        "path",
        "program",
        "project_path",
        "required_args",
        "result",
        "unreadable_matches",
        "url",
        "views",
        "where",
        "windowed",
    )

    def __init__(
        self,
        spec: ToolMatch,
        where: str,
        timeout: float,
        *,
        unreadable_matches: bool = True,
        capability: CapabilityTest | None = None,
    ) -> None:
        if spec.capability is not None and capability is None:
            msg = f"{where}: a capability filter needs its test (capability_filter.compile_capability)"
            raise ValueError(msg)
        self.where = where
        self.label = _label(spec)
        self.message = spec.message
        self.kinds = kinds_of(spec)
        pattern = (
            None
            if spec.name is None
            else NameMatcher(Pattern(spec.name, field=f"{where}.name", timeout=timeout))
        )
        #: Name (and kind) filter over tool names: callable, memoised.
        self.name = _Selector(pattern, self.kinds)
        self.command = _opt(spec.command, f"{where}.command", timeout)
        self.path = _opt(spec.path, f"{where}.path", timeout)
        self.project_path = _opt(spec.project_path, f"{where}.project_path", timeout)
        self.url = _opt(spec.url, f"{where}.url", timeout)
        self.program = _opt(spec.program, f"{where}.program", timeout)
        self.unreadable_matches = unreadable_matches
        #: The capability test (the protect package's), or None.
        self.capability = capability if spec.capability is not None else None
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
        #: (view filter, pattern) in evaluation order.
        self.views = tuple(
            (key, pattern)
            for key, pattern in (
                ("command", self.command),
                ("path", self.path),
                ("project_path", self.project_path),
                ("url", self.url),
                ("program", self.program),
            )
            if pattern is not None
        )
        #: Views whose absence is a configuration error (vally's rule).
        self.required_args = tuple(
            dict.fromkeys(
                [
                    *(_READS.get(k, k) for k, _ in self.views),
                    *(("command",) if self.capability is not None else ()),
                ]
            )
        )
        # A kind some tool decides by an argument (str_replace_editor) needs
        # the call, not only its name.
        by_arg = bool(self.kinds) and any(
            t.by_arg is not None and t.kinds() & self.kinds for t in UNION.values()
        )
        #: Non-empty when matches_args has work to do (filters, then kind).
        self.checks: tuple[tuple[str, Pattern | None], ...] = (
            *self.views,
            *((("capability", None),) if self.capability is not None else ()),
            *self.args,
            *((("kind", None),) if by_arg else ()),
        )

    def matches_call(self, call: ToolCall) -> bool:
        """Name, kind and every argument filter match (raises
        ArgMissingError for an absent view)."""
        return self.name(call.name) and (not self.checks or self.matches_args(call))

    def matches_args(self, call: ToolCall) -> bool:
        """The kind and argument filters match; the caller has matched the name."""
        if self.kinds and call_kind(call) not in self.kinds:
            return False
        # Presence first: a tool the entry selects must have the view,
        # whatever the other filters would say ("configuration error").
        if self.required_args:
            found: dict[str, list[str]] = {}
            for key in self.required_args:
                values = view_of(call, key)
                if values is None:
                    raise ArgMissingError(self._missing(call, key))
                found[key] = values
            for key, pattern in self.views:
                assert pattern is not None
                if key == "program":
                    if not self._programs_match(pattern, found["command"][0]):
                        return False
                elif not any(pattern.search(v) for v in _seen(key, found, call)):
                    return False
            if self.capability is not None and not self.capability(found["command"][0]):
                return False
        args = call.args or {}
        for key, pattern in self.args:
            value = args.get(key)
            if not isinstance(value, str) or not pattern.search(value):
                return False
        return True

    def matched_view(self, call: ToolCall) -> tuple[str, str] | None:
        """(field, value) of the argument this entry's filters matched on a
        call it matches (evidence: the path, not only the call id); None
        when it filters on the name alone."""
        for key, pattern in self.views:
            assert pattern is not None
            if key == "program":
                values = view_of(call, "command")
                return None if not values else ("command", values[0])
            if key == "project_path":
                for value in project_paths(view_of(call, "path") or [], call.cwd):
                    if pattern.search(value):
                        return key, value
                continue
            for value in view_of(call, key) or ():
                if pattern.search(value):
                    return key, value
        if self.capability is not None:
            values = view_of(call, "command")
            return None if not values else ("command", values[0])
        args = call.args or {}
        for key, _ in self.args:
            arg = args.get(key)
            if isinstance(arg, str):
                return f"args.{key}", arg
        return None

    def _programs_match(self, pattern: Pattern, command: str) -> bool:
        from trajgrade.graders.matching._shell import programs

        found = programs(command)
        if any(pattern.search(name) for name in found.names):
            return True
        return found.unknown and self.unreadable_matches

    def _missing(self, call: ToolCall, key: str) -> str:
        tool = UNION.get(call.name)
        has = "" if tool is None else _view_hint(call.name, key)
        return (
            f"configuration error: {self.where} filters on '{key}', but call "
            f"{call.call_id or '?'} to {call.name!r} has no {key}{has}; "
            f"{narrow_advice(self.kinds, key)}, or use "
            f"args: {{{key}: ...}} to skip tools without it"
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


def _seen(key: str, found: dict[str, list[str]], call: ToolCall) -> list[str]:
    """The values filter ``key`` is matched against (``project_path``: the
    paths relative to the call's directory)."""
    if key == "project_path":
        return project_paths(found["path"], call.cwd)
    return found[key]


def _view_hint(name: str, key: str) -> str:
    specs = getattr(UNION[name], key)
    if not specs:
        return f" (a {UNION[name].kind} tool; see docs/agents.md)"
    return f" (read from {', '.join(specs)})"


def _opt(source: str | None, field: str, timeout: float) -> Pattern | None:
    return None if source is None else Pattern(source, field=field, timeout=timeout)


def _label(spec: ToolMatch) -> str:
    # Patterns are shown as the user wrote them (no repr escaping of backslashes).
    parts = {
        k: v
        for k, v in msgspec.structs.asdict(spec).items()
        if v is not None and k != "message"
    }
    if len(parts) == 1 and spec.name is not None:
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


def _validate_message(at: str, spec: ToolMatch, errors: ErrorList) -> None:
    if spec.message is not None and not spec.message.strip():
        errors.add(
            f"{at}.message",
            "`message` must be a non-empty string: the text the model and the user are told",
        )


def validate(where: str, at: str, spec: ToolMatch, errors: ErrorList) -> None:
    _validate_message(at, spec, errors)
    if spec.name is None and spec.kind is None:
        errors.add(at, "give name: (a tool-name regex) or kind: (e.g. shell, read)")
    if spec.kind == []:
        errors.add(f"{at}.kind", "kind: [] selects nothing; name a kind or drop kind")
    for kind in sorted(kinds_of(spec) - KINDS.keys()):
        errors.add(
            f"{at}.kind",
            f"unknown kind {kind!r}; the kinds are {', '.join(KINDS)} "
            "(docs/agents.md lists each agent's tools by kind)",
        )
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
    for key in ("name", "command", "path", "project_path", "url", "program", "result"):
        if getattr(spec, key) == exc.pattern:
            return f"{at}.{key}"
    for key, rx in (spec.args or {}).items():
        if rx == exc.pattern:
            return f"{at}.args.{key}"
    return at
