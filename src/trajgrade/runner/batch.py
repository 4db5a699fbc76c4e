"""The batch run without an event loop: regular files read once, in order.

A plain ``trajgrade grade -c POLICY FILE...`` has nothing to wait for (a
regular file's read never blocks) and no task beside reading, so starting
anyio would only cost start-up (asyncio, ssl). This driver runs the same
:class:`~trajgrade.runner.run_state._Run` steps as :func:`trajgrade.runner.run.run`
synchronously: the same verdicts, summary, messages and exit statuses.
:func:`blocking_run_fits` says which runs it can take; the rest go to the
async runner.
"""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING, Any

from trajgrade.errors import SourceError
from trajgrade.runner.run_state import _Run
from trajgrade.runtime.signals import plain_signals
from trajgrade.sources.stream import open_source

if TYPE_CHECKING:
    from trajgrade.config.model import Suite
    from trajgrade.runner.options import RunOptions
    from trajgrade.runtime.actions import ActionOptions
    from trajgrade.runtime.exit_status import RunSummary
    from trajgrade.sinks import RunSink
    from trajgrade.sources.stream import StreamSource

__all__ = ("blocking_run_fits", "conclude", "run_blocking")


def blocking_run_fits(
    suite: Suite, options: RunOptions, *, actions: ActionOptions | None
) -> bool:
    """Whether this run needs no event loop: regular files read once, and
    none of the tasks that run beside reading (the clock for wall-time
    budgets or idle timeouts, checkpoints, metrics, an OTLP receiver,
    on-fail actions). The status line is the caller's to rule out."""
    if options.live or options.state_dir is not None or not options.inputs:
        return False
    if options.metrics_port is not None or options.idle_timeout is not None:
        return False
    if actions is not None and actions.active:
        return False
    if options.clock == "wall" and any(g.uses_clock for g in suite.graders):
        return False
    # (A name that is no regular file, "-" or a FIFO say, waits in the loop;
    # a missing one fails as the async runner fails it.)
    return all(name != "-" and os.path.isfile(name) for name in options.inputs)


def run_blocking(
    suite: Suite, options: RunOptions, sink: RunSink, log: Any
) -> RunSummary:
    """:func:`trajgrade.runner.run.run` for a run :func:`blocking_run_fits`."""
    state = _Run(suite, options, sink, log)
    state.engine.guarding = state.listens_to_decisions()
    sources = [
        open_source(name, trace_template=options.trace_template)
        for name in options.inputs
    ]
    signals: list[int] = []

    def interrupt(signum: int) -> None:
        # In the signal handler: flags only; logged once reading stopped.
        signals.append(signum)
        state.summary.interrupted = True
        state.reading.cancel()

    try:
        with plain_signals(interrupt):
            _read_all(state, sources, log)
    finally:
        for src in sources:
            src.close()
    if signals:
        log.info("shutdown_requested", signal=signal.Signals(signals[0]).name)
    conclude(state, live=False)
    return state.finish(close_traces=False)


def _read_all(state: _Run, sources: list[StreamSource], log: Any) -> None:
    for src in sources:
        if state.reading.cancel_called:
            return
        try:
            _read(state, src)
        except SourceError as exc:
            log.error("source_failed", source=src.name, reason=exc.message)
            state.summary.input_errors += 1
            state.summary.failed_sources.append(src.name)


def _read(state: _Run, src: StreamSource) -> None:
    """:meth:`_Run.read` without the loop: a stop ends it between chunks."""
    tracked = state.begin_input(src)
    if tracked is None:
        return
    reading = state.reading
    try:
        for chunk in src.blocks():
            state.take(tracked, chunk)
            if reading.cancel_called:
                return  # (the input stays in ``inputs``: conclude ends it)
    except SourceError:
        # What was read before the failure is still graded.
        state.end_input(tracked)
        del state.inputs[tracked.source]
        raise
    state.finish_input(tracked)


def conclude(state: _Run, *, live: bool) -> None:
    """Reading stopped: end the inputs and traces that end here.

    Without state every trace ends now. With state, a run that was stopped
    (a signal, --fail-fast) or follows live inputs leaves its open traces to
    the next run; a batch run that read all its inputs has nothing more to
    wait for and finishes them.
    """
    s = state.summary
    keep = state.store is not None and (s.interrupted or s.stopped or live)
    if keep:
        return
    for key, tracked in list(state.inputs.items()):
        state.end_input(tracked, cut=s.interrupted or s.stopped)
        del state.inputs[key]
    for verdicts in state.engine.finish_batches():
        state.emit(verdicts)
