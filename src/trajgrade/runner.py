"""The grading pipeline at runtime: sources -> decoder -> engine -> sink.

One anyio task group: a task reading the inputs (sequentially, in the order
given) and a clock task when a grader needs the runner's clock; SIGINT and
SIGTERM have plain handlers (see ``run``). Decoding and grading of a chunk are synchronous in the event loop: the
core is fast and has no I/O, and keeping it on one thread keeps every trace's
state single-owner. Verdicts are flushed after every chunk that produced any,
so a verdict reaches stdout as soon as its line was read.

Shutdown: SIGINT/SIGTERM stop reading, close every open trace as at end of
input, flush, and return; a second signal exits at once (status 130), even
while a write to a stalled stdout blocks the loop.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import TYPE_CHECKING, Any, Final

import anyio
import msgspec

from trajgrade.engine import Anomaly, Engine
from trajgrade.errors import Location, SourceError
from trajgrade.pipeline import DEFAULT_MAX_LINE_BYTES, Grading, SourceDecoder
from trajgrade.sources import StreamSource, open_source
from trajgrade.verdicts import Outcome, Verdict

if TYPE_CHECKING:
    from collections.abc import Sequence

    from trajgrade.config import Suite
    from trajgrade.sinks import Sink

__all__ = ("RunOptions", "RunSummary", "run")

#: Exit status when a second signal forces an immediate exit.
FORCED_EXIT: Final = 130


class RunOptions(msgspec.Struct, kw_only=True):
    """How to run (from the CLI or a caller)."""

    inputs: list[str]
    fmt: str = "auto"
    #: ``event``: wall-time uses event timestamps only; ``wall``: also the
    #: runner's clock; ``auto``: ``wall`` for pipes and terminals, ``event``
    #: for regular files.
    clock: str = "auto"
    tick_interval: float = 0.1
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    #: Dataset rows by trace id (``--dataset``).
    samples: dict[str, Any] | None = None
    #: Trace id of events that carry none (``--trace-id``), see
    #: :func:`trajgrade.sources.stream.trace_name`.
    trace_template: str = "{path}"


class RunSummary(msgspec.Struct, kw_only=True):
    """What a run did, for the exit status and the closing log line."""

    events: int = 0
    traces: int = 0
    verdicts: dict[str, int] = msgspec.field(default_factory=dict)
    failed_traces: list[str] = msgspec.field(default_factory=list)
    input_errors: int = 0
    #: Inputs that could not be read to their end.
    failed_sources: list[str] = msgspec.field(default_factory=list)
    anomalies: int = 0
    interrupted: bool = False

    @property
    def all_passed(self) -> bool:
        """True when no final verdict was a fail or an error."""
        return not any(self.verdicts.get(o, 0) for o in (Outcome.FAIL, Outcome.ERROR))


class _Run:
    def __init__(self, suite: Suite, options: RunOptions, sink: Sink, log: Any) -> None:
        self.engine = Engine(suite, samples=options.samples)
        self.grading = Grading(self.engine)
        self.options = options
        self.sink = sink
        self.log = log
        self.summary = RunSummary()
        self.clocked = any(g.uses_clock for g in suite.graders)
        self.use_clock = False
        self._failed: dict[str, None] = {}

    def emit(self, verdicts: Sequence[Verdict]) -> None:
        if not verdicts:
            return
        counts = self.summary.verdicts
        for v in verdicts:
            if v.final:
                counts[v.outcome] = counts.get(v.outcome, 0) + 1
                if v.outcome is not Outcome.PASS:
                    self._failed[v.trace_id] = None
        self.sink.send(verdicts)
        self.sink.flush()

    def report(self) -> None:
        """Log located input errors and anomalies gathered since last time."""
        g = self.grading
        for err in g.errors:
            loc = err.location
            self.log.warning(
                "input_rejected",
                source=loc.file,
                line=loc.line,
                field=loc.field,
                trace=err.trace_id,
                reason=err.message,
            )
        self.summary.input_errors += len(g.errors)
        g.errors.clear()
        for anomaly, loc in g.anomalies:
            self.anomaly(anomaly, loc)
        self.summary.anomalies += len(g.anomalies)
        g.anomalies.clear()

    def anomaly(self, anomaly: Anomaly, loc: Location) -> None:
        if anomaly.kind == "unanswered_calls":
            # Normal for an interrupted session; worth knowing, not a warning.
            self.log.info(
                "calls_unanswered", trace=anomaly.trace_id, reason=anomaly.message
            )
            return
        self.log.warning(
            "input_anomaly",
            source=loc.file,
            line=loc.line,
            trace=anomaly.trace_id,
            kind=anomaly.kind,
            reason=anomaly.message,
        )

    async def read(self, source: StreamSource) -> None:
        decoder = SourceDecoder(
            source.name,
            fmt=self.options.fmt,
            default_trace=source.default_trace,
            max_line_bytes=self.options.max_line_bytes,
        )
        self.use_clock = self.clocked and (
            self.options.clock == "wall"
            or (self.options.clock == "auto" and not source.regular)
        )
        grading = self.grading
        try:
            async for chunk in source.chunks():
                now = time.time() if self.use_clock else None
                self.emit(grading.feed(decoder, decoder.feed(chunk), now=now))
                if grading.errors or grading.anomalies:
                    self.report()
        finally:
            # Also on a signal: what the reader still holds (a partial last
            # line, usage waiting for its response to end) is end of input.
            self.emit(grading.feed(decoder, decoder.close()))
            self.report()
        self.log.debug(
            "source_done",
            source=source.name,
            format=decoder.format,
            bytes=decoder.offset,
        )

    async def clock(self) -> None:
        interval = self.options.tick_interval
        while True:
            await anyio.sleep(interval)
            if self.use_clock:
                self.emit(self.engine.tick(time.time()))

    def finish(self) -> RunSummary:
        self.emit(self.engine.finish())
        for anomaly in self.engine.anomalies:
            self.anomaly(anomaly, Location())
        self.summary.anomalies += len(self.engine.anomalies)
        self.engine.anomalies.clear()
        self.sink.close()
        stats = self.engine.statistics()
        s = self.summary
        s.events = stats.events
        s.traces = stats.closed_traces
        s.failed_traces = list(self._failed)
        return s


async def run(suite: Suite, options: RunOptions, sink: Sink, log: Any) -> RunSummary:
    """Grade every input; return the summary once all traces are final."""
    state = _Run(suite, options, sink, log)
    sources = [
        open_source(name, trace_template=options.trace_template)
        for name in options.inputs
    ]
    reading = anyio.CancelScope()
    loop = asyncio.get_running_loop()  # the anyio backend is asyncio (aiokafka)
    signals = 0

    def interrupt(signum: int) -> None:
        state.summary.interrupted = True
        log.info("shutdown_requested", signal=signal.Signals(signum).name)
        reading.cancel()

    def on_signal(signum: int, frame: Any) -> None:
        # A plain handler, not the event loop's: it also runs while the loop
        # is blocked writing to a stalled stdout, so a second signal always
        # exits at once. The first one is handed to the loop.
        nonlocal signals
        signals += 1
        if signals > 1:
            os._exit(FORCED_EXIT)
        loop.call_soon_threadsafe(interrupt, signum)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        async with anyio.create_task_group() as tg:

            async def read_all() -> None:
                with reading:
                    for src in sources:
                        try:
                            await state.read(src)
                        except SourceError as exc:
                            log.error(
                                "source_failed", source=src.name, reason=exc.message
                            )
                            state.summary.input_errors += 1
                            state.summary.failed_sources.append(src.name)
                tg.cancel_scope.cancel()

            if state.clocked:
                tg.start_soon(state.clock)
            tg.start_soon(read_all)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        for src in sources:
            src.close()
    return state.finish()
