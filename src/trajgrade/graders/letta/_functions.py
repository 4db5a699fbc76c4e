"""letta-evals grading functions, and what custom functions see and return.

The four built-ins reproduce ``letta_evals/graders/builtin.py`` (0.26)
exactly, rationale texts included (``Exact match: True`` uses Python's bool
repr, as upstream does, not the lowercase of its docs). User code gets the
same shapes as under letta-evals: a :class:`Sample` with attribute access and
a :class:`GradeResult` to return (a dict with ``score``/``rationale``/
``metadata`` is accepted too), declared with the :func:`grader` /
:func:`extractor` decorators, so a user's file need not import letta_evals.
Functions decorated by letta_evals' own decorators are accepted as well
(the marker attributes are the same).

Decision: only synchronous functions. trajgrade's core runs no event loop
and does no I/O, and a grader that awaits is one that does I/O per trace;
``@grader`` on an ``async def`` raises TypeError, and a loaded async function
is a config error. A sync function that returns an awaitable gets an
``error`` verdict.

Regexes use Python's syntax and semantics. A pattern is accepted exactly
when Python's ``re`` accepts it (so errors carry upstream's ``re.error``
text); it is then rewritten so that the ``regex`` module, whose per-call
timeout is the ReDoS guard, matches exactly what ``re`` matches (see
``_regex``). A timeout is a
:class:`~trajgrade.graders.matching._match.MatchTimeout`, an ``error`` verdict.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final, TypeVar, overload

import msgspec
import regex

from trajgrade.errors import GradeError
from trajgrade.graders.matching._match import MatchTimeout

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = (
    "BUILTIN_FUNCTIONS",
    "EMPTY_SUBMISSION",
    "EMPTY_TRAJECTORY",
    "GradeResult",
    "InvalidPatternError",
    "Sample",
    "call_function",
    "compile_pattern",
    "extractor",
    "grader",
    "is_per_turn",
    "run_timed",
    "sample_problem",
)

F = TypeVar("F", bound="Callable[..., Any]")

#: Upstream's rationales when the function is not called (graders/base.py).
EMPTY_TRAJECTORY: Final = "Empty trajectory - agent produced no messages"
EMPTY_SUBMISSION: Final = "Empty submission - extractor found no content"


class GradeResult(msgspec.Struct, kw_only=True):
    """What a grading function returns (letta_evals.models.GradeResult)."""

    score: float
    rationale: str | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0.0 <= self.score <= 1.0:
            msg = f"Score must be between 0.0 and 1.0, got {self.score}"
            raise ValueError(msg)


_SAMPLE_FIELDS: Final = frozenset(
    ("id", "input", "ground_truth", "agent_args", "rubric_vars", "extra_vars", "rubric")
)


class Sample:
    """A dataset row with letta-evals' attribute access (``sample.ground_truth``).

    Upstream's fields read as None when absent; any other key of the row is
    an attribute too (``sample.agent_state``).
    """

    __slots__ = ("_row",)

    def __init__(self, row: Mapping[str, Any]) -> None:
        self._row = row

    def __getattr__(self, name: str) -> Any:
        if name in _SAMPLE_FIELDS:
            return self._row.get(name)
        try:
            return self._row[name]
        except KeyError:
            msg = f"sample has no field {name!r}"
            raise AttributeError(msg) from None

    def __repr__(self) -> str:
        return f"Sample({dict(self._row)!r})"


# ------------------------------------------------------------------ decorators
def _named(annotation: Any, name: str) -> bool:
    # `from __future__ import annotations` turns annotations into strings, which
    # upstream's identity check would reject; accept the name as well.
    return annotation == name or getattr(annotation, "__name__", None) == name


@overload
def grader(func: F) -> F: ...
@overload
def grader(*, name: str | None = None) -> Callable[[F], F]: ...
def grader(func: Any = None, *, name: str | None = None) -> Any:
    """Mark ``(sample, submission) -> GradeResult`` as a letta grading function.

    Checks the signature as letta-evals' ``@grader`` does (TypeError).
    ``name`` is accepted so letta-evals files work unchanged; trajgrade finds
    functions by file attribute (``path.py:func``) or entry-point name, so it
    has no other effect.
    """
    import inspect  # only user code uses the decorators

    def decorate(f: F) -> F:
        sig = inspect.signature(f)
        params = list(sig.parameters)
        if len(params) != 2:
            msg = f"Grader {f.__name__} must have exactly 2 parameters (sample: Sample, submission: str), got {len(params)}"
            raise TypeError(msg)
        if params != ["sample", "submission"]:
            msg = f"Grader {f.__name__} must have parameters named 'sample' and 'submission', got {params}"
            raise TypeError(msg)
        ret = sig.return_annotation
        if ret is not inspect.Signature.empty and not _named(ret, "GradeResult"):
            msg = f"Grader {f.__name__} must return GradeResult, got {ret}"
            raise TypeError(msg)
        if inspect.iscoroutinefunction(f):
            msg = f"Grader {f.__name__} is async; trajgrade runs grading functions synchronously (its core runs no event loop), so make it a plain def"
            raise TypeError(msg)
        setattr(f, "_is_grader", True)  # noqa: B010 - the marker letta-evals reads
        return f

    return decorate if func is None else decorate(func)


@overload
def extractor(func: F) -> F: ...
@overload
def extractor(*, name: str | None = None) -> Callable[[F], F]: ...
def extractor(func: Any = None, *, name: str | None = None) -> Any:
    """Mark ``(trajectory, config[, agent_state]) -> str`` as a letta extractor
    (signature checked as letta-evals does; ``name`` as for :func:`grader`)."""
    import inspect  # only user code uses the decorators

    def decorate(f: F) -> F:
        sig = inspect.signature(f)
        params = list(sig.parameters)
        if len(params) not in (2, 3):
            msg = f"Extractor {f.__name__} must have 2 or 3 parameters (trajectory, config) or (trajectory, config, agent_state), got {len(params)}"
            raise TypeError(msg)
        expected = ["trajectory", "config", "agent_state"][: len(params)]
        if params != expected:
            named = ", ".join(f"'{p}'" for p in expected)
            msg = f"Extractor {f.__name__} must have parameters named {named}, got {params}"
            raise TypeError(msg)
        ret = sig.return_annotation
        if ret is not inspect.Signature.empty and not _named(ret, "str"):
            msg = f"Extractor {f.__name__} must return str, got {ret}"
            raise TypeError(msg)
        setattr(f, "_is_extractor", True)  # noqa: B010 - the marker letta-evals reads
        setattr(f, "_extractor_param_count", len(params))  # noqa: B010
        return f

    return decorate if func is None else decorate(func)


# ------------------------------------------------------------------ regexes
class InvalidPatternError(Exception):
    """A pattern Python's ``re`` rejects; the message is ``re.error``'s."""


def compile_pattern(source: str) -> regex.Pattern[str]:
    """Compile Python regex syntax to match exactly as ``re`` does (see
    ``_regex``); InvalidPatternError where upstream's ``re`` fails."""
    from trajgrade.graders.letta._regex import compile_re

    try:
        return compile_re(source)
    except (re.error, regex.error) as exc:
        raise InvalidPatternError(str(exc)) from None


def run_timed(
    method: Callable[..., Any], text: str, *, source: str, where: str, timeout: float
) -> Any:
    """``method(text)`` on a compiled pattern, abandoned after ``timeout`` seconds."""
    try:
        return method(text, timeout=timeout)
    except TimeoutError:
        msg = (
            f"regex {source!r} in {where} ran longer than {timeout:g}s on a "
            f"{len(text):,}-character value and was abandoned; simplify the pattern "
            f"(avoid nested quantifiers such as (a+)+) or raise --regex-timeout"
        )
        raise MatchTimeout(msg) from None


# ------------------------------------------------------------------ built-ins
@grader
def exact_match(sample: Sample, submission: str) -> GradeResult:
    """Whitespace-trimmed equality with ground_truth."""
    if not sample.ground_truth:
        return GradeResult(score=0.0, rationale="No ground_truth answer provided")
    matches = submission.strip() == sample.ground_truth.strip()
    return GradeResult(score=float(matches), rationale=f"Exact match: {matches}")


@grader
def contains(sample: Sample, submission: str) -> GradeResult:
    """Case-insensitive substring check (no stripping)."""
    if not sample.ground_truth:
        return GradeResult(score=0.0, rationale="No ground_truth answer provided")
    found = sample.ground_truth.lower() in submission.lower()
    return GradeResult(score=float(found), rationale=f"Contains ground_truth: {found}")


def regex_match(sample: Sample, submission: str, *, timeout: float) -> GradeResult:
    """Unanchored search of ground_truth as a Python regex, no flags."""
    if not sample.ground_truth:
        return GradeResult(
            score=0.0, rationale="No ground_truth regex pattern provided"
        )
    try:
        pattern = compile_pattern(sample.ground_truth)
    except InvalidPatternError as exc:
        return GradeResult(score=0.0, rationale=f"Invalid regex pattern: {exc}")
    found = (
        run_timed(
            pattern.search,
            submission,
            source=sample.ground_truth,
            where="the sample's ground_truth",
            timeout=timeout,
        )
        is not None
    )
    return GradeResult(score=float(found), rationale=f"Regex match: {found}")


_PRINTABLE: Final = frozenset(map(chr, range(32, 127)))


@grader
def ascii_printable_only(sample: Sample, submission: str) -> GradeResult:
    """Every character in 32..126, ignoring \\n and \\r."""
    to_check = submission.replace("\n", "").replace("\r", "")
    unique = sorted({ch for ch in to_check if ch not in _PRINTABLE})
    if unique:
        preview = ", ".join(repr(c) for c in unique[:5])
        more = "" if len(unique) <= 5 else f" (+{len(unique) - 5} more)"
        return GradeResult(
            score=0.0,
            rationale=f"Found non-printable ASCII characters: {preview}{more}",
        )
    return GradeResult(
        score=1.0, rationale="All characters printable ASCII (ignoring newlines)"
    )


#: Built-in function name -> factory taking the regex timeout.
BUILTIN_FUNCTIONS: Final[dict[str, Callable[[float], Callable[[Sample, str], Any]]]] = {
    "exact_match": lambda _t: exact_match,
    "contains": lambda _t: contains,
    "regex_match": lambda t: lambda s, sub: regex_match(s, sub, timeout=t),
    "ascii_printable_only": lambda _t: ascii_printable_only,
}


# ------------------------------------------------------------------ calling
def call_function(
    func: Callable[[Sample, str], Any], label: str, row: Mapping[str, Any], sub: str
) -> tuple[float, str | None, dict[str, Any]]:
    """Run a grading function; its result as (score, rationale, metadata).

    Anything user code does wrong (raises, returns a bad shape or an
    out-of-range score) is a GradeError naming the function, i.e. an
    ``error`` verdict, never a pass.
    """
    try:
        out = func(Sample(row), sub)
    except GradeError:
        raise
    except Exception as exc:
        msg = f"grader function {label} raised {type(exc).__name__}: {exc}"
        raise GradeError(msg) from exc
    if hasattr(out, "__await__"):
        getattr(out, "close", lambda: None)()  # no "never awaited" warning
        msg = f"grader function {label} returned an awaitable; trajgrade runs grading functions synchronously, so make it a plain def"
        raise GradeError(msg)
    if isinstance(out, dict):
        score, rationale, meta = (
            out.get("score"),
            out.get("rationale"),
            out.get("metadata"),
        )
    elif hasattr(out, "score"):
        score = out.score
        rationale = getattr(out, "rationale", None)
        meta = getattr(out, "metadata", None)
    else:
        msg = f"grader function {label} returned {type(out).__name__}; return a GradeResult (or a dict with score, rationale, metadata)"
        raise GradeError(msg)
    if isinstance(score, bool) or not isinstance(score, int | float):
        msg = f"grader function {label} returned score {score!r}; it must be a number between 0.0 and 1.0"
        raise GradeError(msg)
    if not 0.0 <= score <= 1.0:
        msg = f"grader function {label}: Score must be between 0.0 and 1.0, got {score}"
        raise GradeError(msg)
    if rationale is not None and not isinstance(rationale, str):
        msg = f"grader function {label} returned a {type(rationale).__name__} rationale; it must be a string or None"
        raise GradeError(msg)
    try:
        # Verdicts are written as JSON: metadata must be plain data.
        plain = msgspec.to_builtins(meta or {})
    except (TypeError, msgspec.EncodeError) as exc:
        msg = f"grader function {label} returned metadata that is not JSON data: {exc}"
        raise GradeError(msg) from None
    if not isinstance(plain, dict):
        msg = f"grader function {label} returned metadata of type {type(meta).__name__}; it must be a mapping"
        raise GradeError(msg)
    return float(score), rationale, plain


# ------------------------------------------------------------------ samples
def _text_or_texts(value: Any) -> bool:
    return isinstance(value, str) or (
        isinstance(value, list) and all(isinstance(v, str) for v in value)
    )


def sample_problem(row: Mapping[str, Any]) -> str | None:
    """Why a dataset row is unusable (letta-evals' Sample validators), or None.

    Only the fields this grader reads are checked; upstream's texts are kept.
    """
    inp, truth = row.get("input"), row.get("ground_truth")
    for key, value in (("input", inp), ("ground_truth", truth)):
        if value is not None and not _text_or_texts(value):
            return f"{key} must be a string or a list of strings (got {type(value).__name__} {value!r}); quote numbers in the dataset"
    if isinstance(truth, list) and not isinstance(inp, list):
        return "ground_truth cannot be a list when input is a string"
    if isinstance(inp, list) and isinstance(truth, list) and len(inp) != len(truth):
        return (
            f"input has {len(inp)} items but ground_truth has {len(truth)} items. "
            "For per-turn evaluation, each input must have a corresponding ground_truth."
        )
    return None


def is_per_turn(row: Mapping[str, Any]) -> bool:
    """Both input and ground_truth are lists (letta_evals.utils.is_per_turn_evaluation)."""
    return isinstance(row.get("input"), list) and isinstance(
        row.get("ground_truth"), list
    )
