"""The config of ``flow`` and its small pure helpers (event time, how a
value is shown in a reason), apart from the rule so each module stays short."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal

import msgspec

from trajgrade._util.digest import blake2b
from trajgrade.graders._spec import ConfigBase, ErrorList
from trajgrade.graders.rules._shared import MatcherSpec, compile_matcher

if TYPE_CHECKING:
    from trajgrade.graders.matching._tool_match import Matcher

__all__ = (
    "VALUE_CHARS",
    "FlowConfig",
    "SecretTrigger",
    "kept_form",
    "read_after",
    "redacted",
    "short",
    "time_of",
)

#: Characters of one bound value kept.
VALUE_CHARS: Final = 1024


class SecretTrigger(ConfigBase):
    """``after: {secret: args|result|any}``."""

    secret: Literal["args", "result", "any"]


class FlowConfig(ConfigBase):
    """``{after, forbid | require, within?, bind?, unless_bound?, if_bound?}``."""

    after: Any
    forbid: MatcherSpec | None = None
    require: MatcherSpec | None = None
    #: An integer (calls) or a duration string.
    within: Any = None
    bind: str | None = None
    unless_bound: str | None = None
    if_bound: str | None = None
    max_values: Annotated[int, msgspec.Meta(ge=1, le=4096)] = 256
    min_length: Annotated[int, msgspec.Meta(ge=4, le=256)] = 12


def read_after(
    raw: Any, timeout: float, errors: ErrorList
) -> tuple[Matcher | None, str | None]:
    """``after``: a tool matcher, or ``{secret: ...}``."""
    try:
        if isinstance(raw, dict) and "secret" in raw:
            return None, msgspec.convert(raw, SecretTrigger).secret
        spec: MatcherSpec = msgspec.convert(raw, MatcherSpec)
    except msgspec.ValidationError as exc:
        from trajgrade._util.locate import explain, render
        from trajgrade.graders.matching._tool_match import ToolMatch

        secret = isinstance(raw, dict) and "secret" in raw
        message, rel = explain(exc, SecretTrigger if secret else ToolMatch)
        if not rel:  # the whole entry is of the wrong shape: say what fits
            message = (
                "after must be a tool matcher (a name regex, or {name, kind, args, "
                "command, path, url, program, result}) or {secret: args|result|any}; "
                f"{message[:1].lower()}{message[1:]}"
            )
        errors.add(render(("after", *rel)), message)
        return None, None
    return compile_matcher(spec, "after", timeout, errors, allow_result=True), None


def time_of(state: Any, ts: float | None) -> float:
    """Event time: ``ts``, else the latest seen (0 in a trace without
    timestamps); never backwards. A ``ts`` that is not finite is none (a
    NaN or infinite deadline would never pass)."""
    last = state.last_ts
    if ts is not None and not math.isfinite(ts):
        ts = None
    t = ts if ts is not None else (last if last is not None else 0.0)
    if last is not None and t < last:
        t = last
    state.last_ts = t
    return t


def redacted(secret: str) -> str:
    """A secret named by its first characters only (enough to recognise it)."""
    return f"{secret[:4]!r}… (a {len(secret)}-character secret, redacted)"


def short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def kept_form(value: str, *, exact: bool) -> str:
    """How a bound value is kept, at most ``VALUE_CHARS`` characters. Cut
    short, for ``if_bound`` (a call containing the start of a long value is
    refused: stricter). For ``unless_bound`` (equality) a long value keeps
    a digest of the whole in place of its tail: cut short, reading one file
    of a deep directory would bind every path with the same start."""
    if len(value) <= VALUE_CHARS:
        return value
    if not exact:
        return value[:VALUE_CHARS]
    digest = blake2b(value.encode("utf-8", "surrogatepass"), digest_size=16)
    return f"{value[: VALUE_CHARS - 33]}#{digest.hexdigest()}"
