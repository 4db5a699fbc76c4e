"""The canonical event model: what every grader sees.

Upstream formats are translated into these events at the edge (``formats/``);
graders never see an upstream spelling. Events are frozen msgspec Structs in a
tagged union on ``type`` (vally's vocabulary, extended), so trajgrade's own
JSONL is one encoded event per line and decodes in a single typed pass.

The field names deliberately match the benchmark corpus written by
``gen_traces.py`` (``trace_id, type, step, name, args, call_id, result,
is_error, tokens, ts``), so that file is canonical JSONL as it stands. Two
spellings exist only for it: ``Usage.tokens`` (``{"input", "output"}``) and
``AgentError.result`` (the error text); both are folded into the canonical
fields on decode.

Time is data: ``ts`` is seconds since the epoch (float), as the producer saw
it. The core never reads a clock.

Projection: decode only what a suite reads.
Most of the bytes of a canonical stream are tool results (file contents,
command output), and most suites never look at them: a tool-call matcher
without a ``result:`` filter reads a result's ``call_id`` and ``is_error``
at most. Decoding a result into a Python string costs about an eighth of
the typed decode, so when no grader of the suite reads ``ToolResult.result``
the canonical reader decodes results as :class:`LeanResult`: a subclass of
:class:`ToolResult` whose ``result`` field is renamed to a
key no producer writes, so msgspec skips the JSON ``result`` without building
it and the attribute stays None. Graders keep receiving a ``ToolResult``
(``isinstance`` holds; the engine routes the subclass as ``ToolResult``), and
no pass over the events converts anything.

Agents' readers that can skip the payload cheaply do the same through
``skip_tool_results()`` (:class:`~trajgrade.formats.SkipsToolResults`): the
Codex reader reads a wrapped output's status without building its text and
leaves ``result`` None. tests/formats/test_codex.py checks that every other
field and event is unchanged.

A grader says it never reads ``ToolResult.result`` with a ``reads_result``
attribute set to False; a grader that routes tool results and says nothing
(a third-party plugin) reads it. Likewise, when no grader routes ``usage``
events, the canonical reader decodes them as :class:`LeanUsage`, without
:class:`Usage`'s ``__post_init__``. What a suite reads is its
:class:`Projection`, computed when it is compiled.
tests/properties/test_projection.py checks that a projected decode gives
the same verdicts and decisions as the full one.
"""

from __future__ import annotations

import math
import re
from typing import Any, Final, NamedTuple

import msgspec
from msgspec.structs import force_setattr

from trajgrade._util.depth import MAX_DEPTH
from trajgrade._util.json_values import JSON_FIX, json_problem
from trajgrade.errors import InputError, Location

__all__ = (
    "EVENT_TYPES",
    "FULL",
    "LEANEST_EVENT",
    "LEAN_EVENT",
    "LEAN_USAGE_EVENT",
    "OPEN_CALLS_MAX",
    "PROJECTED",
    "AgentError",
    "Event",
    "LeanResult",
    "LeanUsage",
    "Message",
    "Projection",
    "ToolCall",
    "ToolResult",
    "TraceEnd",
    "TraceStart",
    "TurnStart",
    "Usage",
    "checked",
)


#: How many calls still without their result one trace keeps, for pairing
#: results with calls (the engine's integrity check, graders that read
#: results or durations). Past it the oldest open call is dropped, as if its
#: result had been lost: a result for it that still comes pairs with nothing.
#: Per-trace state stays bounded whatever a stream holds (a call made every
#: second for three hours leaves 10,800, a long session's tools rarely 100).
OPEN_CALLS_MAX: Final = 10_000


class _Base(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    omit_defaults=True,
    tag_field="type",
    gc=False,
):
    #: The trace (session, run) this event belongs to. Empty means "the
    #: source's default trace" and is filled in by the reader.
    trace_id: str = ""
    #: Producer time, seconds since the epoch.
    ts: float | None = None
    #: The producer's own turn/step index, when it has one (informational;
    #: graders count ``turn_start`` events).
    step: int | None = None


class TraceStart(_Base, tag="trace_start", frozen=True):
    """A trace begins; ``metadata`` carries sample ids, task, agent name, …"""

    metadata: dict[str, Any] | None = None


class TurnStart(_Base, tag="turn_start", frozen=True):
    """An agent turn (step) begins. The first turn is step 0."""

    #: Who opened the turn when the format says (``user``, ``agent``, ``system``).
    source: str | None = None


class Message(_Base, tag="message", frozen=True):
    """A chat message: user prompt, assistant text, system text, reasoning."""

    role: str
    text: str = ""


class ToolCall(_Base, tag="tool_call", frozen=True):
    """The agent invoked a tool."""

    name: str
    call_id: str | None = None
    #: Arguments as an object, when they are (or parse as) a JSON object.
    args: dict[str, Any] | None = None
    #: Arguments exactly as the source wrote them, when it wrote a string.
    args_raw: str | None = None
    #: Arguments that are JSON but neither an object nor a string (``null``,
    #: a number, an array), as JSON text: agentv compares such an ``input`` as
    #: the value it is, unlike a missing one.
    args_json: str | None = None
    #: The (sub)agent that made the call, when the format distinguishes them.
    agent: str | None = None
    #: The directory the call runs in, when the source says (every hook
    #: payload does): the guard anchors the call's relative paths there.
    cwd: str | None = None


class ToolResult(_Base, tag="tool_result", frozen=True):
    """A tool returned; paired to its call by ``call_id``."""

    call_id: str | None = None
    name: str | None = None
    #: The result as the source had it: a string, an object, a list, …
    result: Any = None
    is_error: bool | None = None
    duration_ms: float | None = None


class _UsageCounts(_Base, frozen=True):
    """The fields of :class:`Usage`, shared with :class:`LeanUsage` (which
    must not inherit Usage's ``__post_init__``)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float | None = None
    #: The model that produced the response, as the source names it
    #: (``claude-sonnet-4-5``, ``gpt-5-codex``, …); prices a usage event.
    model: str | None = None
    #: Benchmark-corpus spelling: ``{"input": n, "output": m}``.
    tokens: dict[str, int] | None = None


class Usage(_UsageCounts, tag="usage", frozen=True):
    """Token usage of one model response (not cumulative).

    ``input_tokens`` counts every input token the model processed, cached or
    not (OpenAI's convention; Anthropic's cache reads and writes are added
    in); ``cache_read_tokens``, ``cache_write_tokens`` and
    ``reasoning_tokens`` say how many of them were of that kind.
    """

    def __post_init__(self) -> None:
        if self.tokens:
            tokens = self.tokens
            force_setattr(
                self, "input_tokens", self.input_tokens + tokens.get("input", 0)
            )
            force_setattr(
                self, "output_tokens", self.output_tokens + tokens.get("output", 0)
            )
            force_setattr(self, "tokens", None)


class AgentError(_Base, tag="error", frozen=True):
    """The agent or its runtime reported an error (not a failed tool call)."""

    message: str = ""
    code: str | None = None
    #: Benchmark-corpus spelling of ``message``.
    result: str | None = None
    is_error: bool | None = None

    def __post_init__(self) -> None:
        if self.result is not None:
            if not self.message:
                force_setattr(self, "message", self.result)
            force_setattr(self, "result", None)
        force_setattr(self, "is_error", None)


class TraceEnd(_Base, tag="trace_end", frozen=True):
    """The trace is over: every grader gives its final verdict now."""

    #: The agent's final output, when the source has one.
    result: Any = None
    #: True when the run ended in failure (crash, cancelled, non-zero exit).
    is_error: bool | None = None


Event = (
    TraceStart
    | TurnStart
    | Message
    | ToolCall
    | ToolResult
    | Usage
    | AgentError
    | TraceEnd
)

#: Tag -> class, for registries and docs.
EVENT_TYPES: Final[dict[str, type[Event]]] = {
    cls.__struct_config__.tag: cls  # type: ignore[misc]
    for cls in (
        TraceStart,
        TurnStart,
        Message,
        ToolCall,
        ToolResult,
        Usage,
        AgentError,
        TraceEnd,
    )
}


_CLASSES: Final = tuple(EVENT_TYPES.values())
#: The fields declared ``Any``: whatever a caller puts in them is checked
#: to be what a JSON line could hold.
_FREE: Final = ("args", "metadata", "result")
_JSON: Final = msgspec.json.Encoder()
_FIELD: Final = re.compile(r"`\$\.([^`]+)`")
#: A projected event's class -> its event class (filled below, with PROJECTED).
_PROJECTED_AS: dict[type[Any], type[Any]] = {}


def checked(event: object) -> Event:
    """``event``, checked as a decoder checks a record.

    msgspec does not check field types when an event is built in code, so
    ``ToolCall(name=None)`` or ``ToolCall(trace_id=5)`` would reach the
    graders (and crash or mislead them). Raises :class:`TypeError` for an
    object that is not an event at all, and
    :class:`~trajgrade.errors.InputError` (``location.field``, ``trace_id``)
    for an event a log line could not have given: a field of the wrong type,
    a number that is not finite, a value a JSON line cannot hold (bytes, a
    set, a datetime, a NaN or a key that is not a str at any depth: the
    error names its path, ``args.command``). An instance of a subclass is
    given back as its event class, an event holding tuples or enums of
    str/int as its JSON line decodes. Not on the per-event path of
    decoded input: its decoders check every record already.
    """
    cls: type[Any] = type(event)
    if cls not in _CLASSES:
        base = _PROJECTED_AS.get(cls) or next(
            (c for c in _CLASSES if isinstance(event, c)), None
        )
        if base is None:
            names = ", ".join(c.__name__ for c in _CLASSES)
            msg = (
                f"a {cls.__name__} is not an event; build one of {names} "
                f"(trajgrade.events), or give a mapping or a JSON line to StreamGrader.feed"
            )
            raise TypeError(msg)
        cls = base
    fields = msgspec.structs.asdict(event)  # type: ignore[arg-type]
    try:
        as_read: Event = msgspec.convert(fields, cls)
    except msgspec.ValidationError as exc:
        raise _invalid(cls, fields, str(exc)) from None
    for name, value in fields.items():
        if type(value) is float and not math.isfinite(value):
            what = f"Expected a finite number, got {value!r} - at `$.{name}`"
            raise _invalid(cls, fields, what)
    loose = False
    for name in _FREE:  # (the types above say nothing of what these hold)
        value = fields.get(name)
        if value is None or type(value) is str:
            continue
        problem, tuples = json_problem(value, MAX_DEPTH - 1)
        if problem is not None:
            path, what = problem
            path = f"{name}{path}" if path[:1] in ("", "[") else f"{name}.{path}"
            raise _invalid(cls, fields, f"{what} - at `$.{path}`", JSON_FIX)
        loose = loose or tuples
    if loose:  # (a tuple, an enum: given to graders as a line gives them)
        as_line: Event = msgspec.json.decode(_JSON.encode(fields), type=cls)
        return as_line
    return event if cls is type(event) else as_read


_TYPES_FIX: Final = "build events with the field types trajgrade.events declares (msgspec does not check them in code)"


def _invalid(
    cls: type[Any], fields: dict[str, Any], problem: str, fix: str = _TYPES_FIX
) -> InputError:
    found = _FIELD.search(problem)
    field = found.group(1) if found else None
    what = problem.split(" - at ", 1)[0]
    where = f"{cls.__name__}.{field}" if field else cls.__name__
    tid = fields.get("trace_id")
    msg = f"{where}: {what[:1].lower()}{what[1:]}; {fix}"
    return InputError(
        msg,
        location=Location(field=field),
        trace_id=tid if isinstance(tid, str) else None,
    )


# ---------------------------------------------------------------- projection


class LeanResult(ToolResult, tag="tool_result", frozen=True):
    """A :class:`ToolResult` decoded without its ``result`` (None)."""

    #: Never a producer's key: the JSON ``result`` is skipped unread.
    result: Any = msgspec.field(name="result (not decoded)", default=None)


class LeanUsage(_UsageCounts, tag="usage", frozen=True):
    """A :class:`Usage` decoded for a suite no grader of which routes usage:
    the same fields, checked the same, without Usage's ``__post_init__`` (a
    Python call per event; the benchmark corpus's ``tokens`` stay as they
    are, unfolded). Only the engine's bookkeeping (trace, time) and the
    report's ``cost_usd`` read it."""


#: The canonical union with tool results projected (same tags, same order).
LEAN_EVENT: Final[Any] = (
    TraceStart
    | TurnStart
    | Message
    | ToolCall
    | LeanResult
    | Usage
    | AgentError
    | TraceEnd
)
#: The canonical union with usage projected.
LEAN_USAGE_EVENT: Final[Any] = (
    TraceStart
    | TurnStart
    | Message
    | ToolCall
    | ToolResult
    | LeanUsage
    | AgentError
    | TraceEnd
)
#: The canonical union with tool results and usage projected.
LEANEST_EVENT: Final[Any] = (
    TraceStart
    | TurnStart
    | Message
    | ToolCall
    | LeanResult
    | LeanUsage
    | AgentError
    | TraceEnd
)
#: Each projected event class -> the class graders are routed it as.
PROJECTED: Final[dict[type[Any], type[Event]]] = {
    LeanResult: ToolResult,
    LeanUsage: Usage,
}
_PROJECTED_AS.update(PROJECTED)


class Projection(NamedTuple):
    """What a suite reads of the events, computed once when it is compiled
    (:attr:`trajgrade.config.model.Suite.projection`): the decoders build
    no more than that."""

    #: Some grader reads ``ToolResult.result``.
    tool_results: bool = True
    #: Some grader routes ``usage`` events (and reads its folded counts).
    usage: bool = True


#: Everything decoded (a suite unknown, or one that reads it all).
FULL: Final = Projection()
