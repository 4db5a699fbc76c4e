"""Embedding: grade an agent's events from your own Python code.

:class:`StreamGrader` is one compiled policy plus the state of every trace it
has seen. Feed it events as they happen and it returns the verdicts each one
decided; ``finish()`` closes the traces still open. It is the same engine and
the same decoders as ``trajgrade grade``, so a verdict here is the verdict
the command line would print::

    from trajgrade import StreamGrader

    grader = StreamGrader.from_file("policy.yaml")
    for line in agent_stdout:               # any supported format, one record a line
        for v in grader.feed(line):
            if grader.should_stop(v):
                stop_the_agent(v.evidence)
        for d in grader.take_decisions():   # per call, retries included
            if d.action in ("deny", "abort") and d.call_id is not None:
                refuse(d.call_id, d.reason)
    final = grader.finish()

What ``feed`` takes: a canonical :class:`~trajgrade.events.Event`, a mapping
(a canonical event or a record of any line format, e.g. one Claude Code
``stream-json`` object), or one JSON line as ``str``/``bytes``. Raw chunks
that may cut lines go to ``feed_bytes(chunk, source=...)``, which frames
lines per source. Bad records never raise: they are kept in ``errors``
(located) and taint their trace, as in the CLI.

The synchronous part is plain calls (no event loop, no threads). A compiled
Suite may be shared by graders in many threads; one grader serves one
caller at a time (a second, concurrent call raises ConcurrentUseError).
Events built in code are checked as decoded records are
(:func:`trajgrade.events.checked`). The async helpers (api_async),
:meth:`StreamGrader.grade_stream` (an async iterator of verdicts) and
:meth:`StreamGrader.grade_stream_to` (a callback, with a clock for wall-time
budgets), import anyio only when called, so ``import trajgrade`` stays light.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Final

from trajgrade._util.json_values import JSON_FIX, Problem
from trajgrade.api.checkpoints import restore_checkpoint, take_checkpoint
from trajgrade.api.checks import check_source, exclusive
from trajgrade.api.records import Refused, record_line
from trajgrade.api.stream_host import Feedable
from trajgrade.api.streams import LiveStreams
from trajgrade.config.compile import compile_suite, load_suite
from trajgrade.config.decode import decode_config
from trajgrade.config.model import OnFail, Suite
from trajgrade.engine.engine import Anomaly, Engine
from trajgrade.errors import InputError, Location
from trajgrade.events import EVENT_TYPES, Event, checked
from trajgrade.graders import BuildContext
from trajgrade.pipeline.decoder import API_FIXES, DEFAULT_MAX_LINE_BYTES, SourceDecoder
from trajgrade.pipeline.grading import Grading
from trajgrade.pipeline.options import check_input_options
from trajgrade.verdicts import GuardDecision, Outcome, Verdict

if TYPE_CHECKING:
    import os
    from collections.abc import (
        AsyncIterable,
        AsyncIterator,
        Awaitable,
        Callable,
        Mapping,
    )

__all__ = ("Feedable", "StreamGrader")

_EVENT_CLASSES: Final = tuple(EVENT_TYPES.values())
_BYTES: Final[tuple[type, ...]] = (bytes, bytearray, memoryview)


class StreamGrader:
    """A compiled policy and the live state of the traces it grades."""

    def __init__(
        self,
        suite: Suite,
        *,
        fmt: str = "auto",
        source: str = "<api>",
        samples: Mapping[str, Any] | None = None,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        guarding: bool = True,
    ) -> None:
        check_input_options(fmt, source, max_line_bytes)
        self.suite = suite
        self._samples = samples
        self.engine = Engine(suite, samples=samples, guarding=guarding)
        self._grading = Grading(self.engine)
        self._lock = threading.Lock()
        #: The async streams running on this grader (api_async).
        self._live = LiveStreams()
        self._fmt = fmt
        self._source = source
        self._max = max_line_bytes
        self._decoders: dict[str, SourceDecoder] = {}
        self._clocked = any(g.uses_clock for g in suite.graders)
        #: Records that could not be read, located (source, line).
        self.errors: list[InputError] = []
        #: Odd but survivable input (orphan results, reused call ids), located.
        self.anomalies: list[tuple[Anomaly, Location]] = []

    # ------------------------------------------------------------ building
    @classmethod
    def from_file(
        cls,
        path: str | os.PathLike[str],
        *,
        regex_timeout: float = 0.25,
        allow_code: bool = False,
        threshold: float | None = None,
        **options: Any,
    ) -> StreamGrader:
        """Load a policy file (YAML, or JSON when it ends in ``.json``).

        Raises :class:`~trajgrade.errors.ConfigError` (every problem, located).
        ``options`` go to the constructor (``fmt``, ``source``, ``samples``).
        """
        context = BuildContext(
            regex_timeout=regex_timeout, allow_code=allow_code, threshold=threshold
        )
        return cls(load_suite(path, context=context), **options)

    @classmethod
    def from_text(
        cls,
        text: str | bytes,
        *,
        json: bool = False,
        name: str = "<policy>",
        base_dir: str | None = None,
        regex_timeout: float = 0.25,
        allow_code: bool = False,
        threshold: float | None = None,
        **options: Any,
    ) -> StreamGrader:
        """Compile a policy given as YAML (or JSON) text."""
        config = decode_config(text, name=name, json=json, base_dir=base_dir)
        context = BuildContext(
            regex_timeout=regex_timeout,
            allow_code=allow_code,
            threshold=threshold,
            base_dir=base_dir,
        )
        return cls(compile_suite(config, context=context), **options)

    # ------------------------------------------------------------ feeding
    @exclusive
    def feed(self, item: Feedable, *, source: str | None = None) -> list[Verdict]:
        """Grade one event or one record; return the verdicts it decided.

        Mappings and JSON lines go through the format detected from the first
        record of ``source`` (default: this grader's source), exactly as one
        line of a log file would. An event built in code with a wrong field
        type (``ToolCall(name=None)``) is a bad record too: kept in
        ``errors``, its trace tainted.
        """
        return self._feed(item, source, None)

    def _feed(
        self, item: Feedable, source: str | None, traces: set[str] | None
    ) -> list[Verdict]:
        """:meth:`feed`; ``traces`` (an async stream's): gets the ids of
        the traces fed."""
        check_source(source)
        if isinstance(item, _EVENT_CLASSES):
            return self._feed_event(item, source, traces)
        line = record_line(item)
        if isinstance(line, Refused):
            return self._refuse(line.record, source, line.problem)
        return self._feed_bytes(line, source, traces)

    def _feed_event(
        self, item: Event, source: str | None, traces: set[str] | None
    ) -> list[Verdict]:
        """One event built in code, checked as a decoded record is."""
        try:
            event = checked(item)
        except InputError as exc:  # built in code with a wrong field type
            where = Location(file=source or self._source, field=exc.location.field)
            return self._lost(exc.message, where, exc.trace_id or source)
        now = time.time() if self._clocked else None
        out = self.engine.feed_many(
            [event], now=now, default_trace=source or self._source
        )
        if traces is not None:
            traces.add(event.trace_id or source or self._source)
        self._collect()
        return out

    @exclusive
    def feed_bytes(self, chunk: bytes, *, source: str | None = None) -> list[Verdict]:
        """Grade the next bytes of ``source``: lines may be cut anywhere; a
        partial last line waits for the rest (or for :meth:`finish`)."""
        if not isinstance(chunk, _BYTES):  # (a careless caller's str)
            msg = (
                f"feed_bytes() takes bytes (raw chunks of a source), not a "
                f"{type(chunk).__name__}; encode text first (chunk.encode()), "
                f"or give one record to feed()"
            )
            raise TypeError(msg)
        return self._feed_bytes(bytes(chunk), source, None)

    def _feed_bytes(
        self, chunk: bytes, source: str | None, traces: set[str] | None
    ) -> list[Verdict]:
        check_source(source)
        decoder = self._decoder(source or self._source)
        now = time.time() if self._clocked else None
        batch = decoder.feed(chunk)
        if traces is not None:
            default = decoder.default_trace
            traces.update([e.trace_id or default for e in batch.events])
        out = self._grading.feed(decoder, batch, now=now)
        self._collect()
        return out

    @exclusive
    def tick(self, now: float | None = None) -> list[Verdict]:
        """Let wall-time budgets fire while no event arrives (``now``: epoch
        seconds, default the current time)."""
        return self.engine.tick(time.time() if now is None else now)

    @exclusive
    def end_trace(self, trace_id: str) -> list[Verdict]:
        """Close one trace as if it ended: its graders give final verdicts."""
        return self.engine.end_trace(trace_id)

    @exclusive
    def finish(self) -> list[Verdict]:
        """End of input: flush partial lines and close every open trace.

        The grader stays usable; traces seen before are not reopened.
        """
        out: list[Verdict] = []
        for decoder in self._decoders.values():
            out.extend(self._grading.feed(decoder, decoder.close()))
        self._decoders.clear()
        out.extend(self.engine.finish())
        self._collect()
        return out

    @exclusive
    def close_source(self, source: str) -> list[Verdict]:
        """End of one source (a connection closed): its partial last line is
        graded and its line reader let go (each holds about 1 KB until then,
        or until :meth:`finish`). Its traces stay open until their
        ``trace_end``, :meth:`end_trace` or :meth:`finish`."""
        check_source(source)
        decoder = self._decoders.pop(source, None)
        if decoder is None:
            return []
        out = self._grading.feed(decoder, decoder.close())
        self._collect()
        return out

    # ------------------------------------------------------------ policy
    def on_fail(self, verdict: Verdict) -> OnFail | None:
        """The ``on_fail:`` marking of a failed verdict's grader (None when
        the verdict did not fail; ``error`` outcomes are not fails here)."""
        if verdict.outcome is not Outcome.FAIL:
            return None
        return self.suite.on_fail.get(verdict.grader, OnFail.DENY)

    def should_stop(
        self, verdict: Verdict | GuardDecision, *, deny_stops: bool = True
    ) -> bool:
        """Whether a verdict or guard decision should stop a running agent, as
        ``trajgrade run`` decides: a fail marked ``abort``, or ``deny``/``ask``
        unless ``deny_stops`` is false (when you can refuse the single call
        instead: see :meth:`take_decisions`). ``warn`` and ``report`` never stop."""
        if isinstance(verdict, GuardDecision):
            if verdict.outcome is not Outcome.FAIL:
                return False
            mark: OnFail | None = OnFail(str(verdict.action))
        else:
            mark = self.on_fail(verdict)
        return mark is OnFail.ABORT or (
            deny_stops and mark in (OnFail.DENY, OnFail.ASK)
        )

    # ------------------------------------------------------------ guard
    @property
    def decisions(self) -> list[GuardDecision]:
        """Guard decisions not yet taken (see :meth:`take_decisions`)."""
        return self.engine.decisions

    @exclusive
    def take_decisions(self) -> list[GuardDecision]:
        """The guard decisions made since the last call, oldest first; drain
        them after each :meth:`feed` (they accumulate until taken).

        One per (call, grader) a rule forbids, every time the call is made,
        retries included; ``call_id`` None is a run-level decision (a
        grader marked ``abort`` failed: stop the run). Refuse the call when
        ``action`` is ``deny``/``abort`` (``ask``: ask your user), let it run
        and report it when ``warn``. See docs/guard.md.
        """
        out = list(self.engine.decisions)
        self.engine.decisions.clear()
        return out

    # ------------------------------------------------------------ checkpoints
    @exclusive
    def checkpoint(self) -> bytes:
        """Every trace's state as bytes (msgpack). Take it between records:
        a partial line held by :meth:`feed_bytes` is not included."""
        return take_checkpoint(self.suite, self.engine)

    @exclusive
    def restore(self, data: bytes) -> None:
        """Load a :meth:`checkpoint` taken with the same policy into this
        grader, which must not have graded anything yet.

        Raises :class:`~trajgrade.errors.ConfigError` when it came from another
        policy, :class:`~trajgrade.errors.InputError` when it is not a
        checkpoint (or one of another format version), and
        :class:`~trajgrade.errors.StateError` when this grader has state of
        its own. A refused checkpoint changes nothing.
        """
        restore_checkpoint(
            data,
            suite=self.suite,
            engine=self.engine,
            samples=self._samples,
            reading=bool(self._decoders),
        )

    # ------------------------------------------------------------ async
    def grade_stream(
        self,
        items: AsyncIterable[Feedable],
        *,
        source: str | None = None,
        finish: bool = True,
    ) -> AsyncIterator[Verdict]:
        """Yield verdicts as the items of a live source decide them.

        ``bytes`` items are raw chunks of ``source`` (a pipe, a socket:
        framed by :meth:`feed_bytes`); anything else is one record
        (:meth:`feed`). At the end of ``items`` the open traces are finished
        (unless ``finish=False``); while other streams run on this grader,
        only the traces this stream's items fed (and no other stream's) are
        ended, and the last stream to end finishes the rest. Wall-time budgets are checked at each item;
        use :meth:`grade_stream_to` to have them fire between items too.
        The next item is read only when the last verdict was taken
        (backpressure). Verdicts decided but not yet taken when the stream
        is cancelled or left are kept for :meth:`take_undelivered` once the
        stream is closed (``contextlib.aclosing``, or when it is collected).
        Several streams may run at once on one grader (one per source):
        each yields only the verdicts of its own items.
        """
        # (The async generator itself is LiveStreams': nothing runs, not
        # even the check of ``source``, before its first item is asked for.)
        return self._live.grade_stream(self, items, source=source, finish=finish)

    async def grade_stream_to(
        self,
        items: AsyncIterable[Feedable],
        on_verdict: Callable[[Verdict], Awaitable[None] | None],
        *,
        source: str | None = None,
        finish: bool = True,
        tick_interval: float = 0.1,
    ) -> None:
        """Call ``on_verdict`` (plain or async) for every verdict of a live
        source; wall-time budgets fire on the clock between items. Its
        end finishes traces as :meth:`grade_stream`'s does. An
        exception of ``items`` or ``on_verdict`` is raised as it is (not in
        an exception group); cancelled, it keeps the verdicts not yet handed
        over for :meth:`take_undelivered`."""
        await self._live.grade_stream_to(
            self,
            items,
            on_verdict,
            source=source,
            finish=finish,
            tick_interval=tick_interval,
        )

    def take_undelivered(self) -> list[Verdict]:
        """The verdicts async streams decided but had not handed over when
        they were cancelled or their consumer stopped early, oldest first."""
        return self._live.take_undelivered()

    # ------------------------------------------------------------ internals
    @exclusive
    def _feed_any(
        self, item: Feedable, source: str | None, traces: set[str]
    ) -> list[Verdict]:
        """One item of an async stream (api_async); ``traces`` gets the ids
        of the traces it fed."""
        out: list[Verdict] = []
        if self._clocked:
            out.extend(self.engine.tick(time.time()))
        if isinstance(item, bytes | bytearray | memoryview):
            out.extend(self._feed_bytes(bytes(item), source, traces))
        else:
            out.extend(self._feed(item, source, traces))
        return out

    @exclusive
    def _end_stream(
        self, source: str | None, traces: set[str], keep: set[str], *, close: bool
    ) -> list[Verdict]:
        """The end of an async stream while others still run on this grader:
        its source's partial last line (``close``: no other stream reads
        that source) and its ``traces``, but not the others' (``keep``)
        (api_async)."""
        out: list[Verdict] = []
        decoder = self._decoders.pop(source or self._source, None) if close else None
        if decoder is not None:
            batch = decoder.close()
            traces.update([e.trace_id or decoder.default_trace for e in batch.events])
            out += self._grading.feed(decoder, batch)
        mine = [t for t in self.engine.open_traces() if t in traces and t not in keep]
        for part in self.engine.end_batches(mine):
            out += part
        self._collect()
        return out

    def _decoder(self, source: str) -> SourceDecoder:
        decoder = self._decoders.get(source)
        if decoder is None:
            decoder = SourceDecoder(
                source,
                fmt=self._fmt,
                default_trace=source,
                max_line_bytes=self._max,
                projection=self.suite.projection,
                fixes=API_FIXES,
            )
            self._decoders[source] = decoder
        return decoder

    def _refuse(
        self, item: Mapping[str, Any], source: str | None, problem: Problem
    ) -> list[Verdict]:
        """A mapping that is not JSON (or too deep to write) is a bad record:
        kept in ``errors`` (naming the value's path), its trace tainted,
        never raised."""
        trace = item.get("trace_id")
        where = Location(file=source or self._source, field=problem.path or None)
        at = f" at {problem.path}" if problem.path else ""
        msg = f"the record cannot be read as JSON{at}: {problem.what}; {JSON_FIX}"
        return self._lost(
            msg, where, (trace if isinstance(trace, str) else "") or source
        )

    def _lost(self, message: str, where: Location, trace: str | None) -> list[Verdict]:
        trace = trace or self._source
        err = InputError(message, location=where, trace_id=trace)
        self.errors.append(err)
        self.engine.reject(trace, str(err))
        return []

    def _collect(self) -> None:
        g = self._grading
        if g.errors:
            self.errors.extend(g.errors)
            g.errors.clear()
        if g.anomalies:
            self.anomalies.extend(g.anomalies)
            g.anomalies.clear()
        if self.engine.anomalies:
            self.anomalies.extend((a, Location()) for a in self.engine.anomalies)
            self.engine.anomalies.clear()
