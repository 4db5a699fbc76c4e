"""``trajgrade run``: start an agent, grade its live event stream, stop it on a fail.

The agent is a child process whose stdout is its JSON event stream (Claude
Code ``-p --output-format stream-json --verbose``, ``codex exec --json``, or
any format ``trajgrade formats`` lists; detected from the first line). Each
chunk the child writes is graded exactly as ``grade`` grades a pipe
(:class:`~trajgrade.pipeline.decoder.SourceDecoder` -> :class:`~trajgrade.pipeline.grading.Grading`
-> :class:`~trajgrade.engine.engine.Engine`), *then* passed through unchanged: the
stop decision never waits behind a slow reader of the agent's output.

Channels (the agent's output stays byte-exact):

* the agent's stdout -> our stdout, or ``--agent-output FILE``;
* the agent's stderr -> our stderr, untouched (inherited);
* verdicts -> stderr, or ``--verdicts FILE`` (``-``: stdout, only when the
  agent's output goes to a file);
* guard decisions -> ``--decisions FILE`` (``-``: stdout, under the same
  condition; after the verdicts of the same event), else only the actions
  (stop, log) see them;
* logs (why the agent was stopped, its exit status) -> stderr.

Stopping: the first guard decision (or verdict) with outcome ``fail`` from
a grader whose ``on_fail:`` marking is in ``--stop-on`` (default: ``abort``,
``deny`` and ``ask``; the wrapper can neither refuse one call nor ask, so
those stop too; ``warn`` decisions are logged) makes the wrapper
send SIGTERM to the agent's process group, then SIGKILL after ``--grace``
seconds. The agent runs in its own process group (a new session), so its
tool processes (a shell running the offending command) are stopped with it,
and a Ctrl-C reaches it once, forwarded by us, not twice.

Signals: SIGINT, SIGTERM and SIGHUP sent to trajgrade are forwarded to the
agent's process group; a second one, or ``--grace`` seconds without the agent
exiting, kills the group. Reading goes on until the agent's output ends, so
every verdict is still written. What the agent leaves running in its group
is stopped when the run ends (:func:`~trajgrade.wrapper.agent_group.stop_leftovers`).

Exit status: :data:`EXIT_CODES`.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import IO, TYPE_CHECKING, Any, Final

import anyio
import msgspec

from trajgrade.config.model import OnFail
from trajgrade.engine.engine import Engine
from trajgrade.errors import Location, SourceError
from trajgrade.pipeline import DEFAULT_MAX_LINE_BYTES, Grading, SourceDecoder
from trajgrade.runtime.actions import ActionOptions, Actions
from trajgrade.runtime.exit_status import (
    EXIT_FAILED,
    EXIT_NOTHING,
    EXIT_OK,
    EXIT_USAGE,
    FailedTraces,
    tally,
)
from trajgrade.runtime.reporting import report_problems
from trajgrade.verdicts import GuardDecision, Outcome, Verdict
from trajgrade.wrapper import agent_group as group
from trajgrade.wrapper.agent_output import AgentOutput, OutputAbandoned

if TYPE_CHECKING:
    from collections.abc import Sequence

    from trajgrade.config.model import Suite
    from trajgrade.sinks import Sink
    from trajgrade.sinks.decisions import DecisionWriter

__all__ = (
    "EXIT_AGENT_FAILED",
    "EXIT_CODES",
    "EXIT_FAILED",
    "EXIT_NOTHING",
    "EXIT_OK",
    "EXIT_STOPPED",
    "EXIT_USAGE",
    "STOP_ON",
    "WrapOptions",
    "WrapSummary",
    "wrap",
)

# 0, 1, 2 and 5 mean for ``run`` what they mean for ``grade``; 3 and 4 are
# ``run``'s own.
EXIT_STOPPED: Final = 3
EXIT_AGENT_FAILED: Final = 4
#: Exit statuses of ``trajgrade run`` and what they mean (docs/hooks.md and ``--help``).
EXIT_CODES: Final = {
    EXIT_OK: "the agent exited 0 and every verdict passed",
    EXIT_FAILED: "the agent ran to its end and at least one verdict is fail or error",
    EXIT_USAGE: "usage or config error, or the agent could not be started",
    EXIT_STOPPED: "trajgrade stopped the agent on a fail (the reason is logged)",
    EXIT_AGENT_FAILED: "the agent exited non-zero or was killed, on its own (its status is logged)",
    EXIT_NOTHING: "the agent exited 0 but nothing was graded: its output held no events of the format",
    128: "+N: signal N sent to trajgrade (forwarded to the agent) ended the run",
}
#: ``--stop-on`` value -> the ``on_fail:`` markings whose fails stop the agent.
STOP_ON: Final[dict[str, frozenset[OnFail]]] = {
    # The wrapper can neither refuse one call nor ask the user: deny and ask
    # stop the agent too; warn (shadow mode) and report never do.
    "marked": frozenset({OnFail.ABORT, OnFail.DENY, OnFail.ASK}),
    "abort": frozenset({OnFail.ABORT}),
    "never": frozenset(),
}
#: Signals forwarded to the agent.
_FORWARDED: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class WrapOptions(msgspec.Struct, kw_only=True):
    """How to run and watch one agent (from the CLI or a caller)."""

    #: The agent's command line (argv; no shell).
    command: list[str]
    fmt: str = "auto"
    #: Which ``on_fail:`` markings stop the agent (a key of :data:`STOP_ON`).
    stop_on: str = "marked"
    #: Seconds between SIGTERM and SIGKILL when stopping the agent.
    grace: float = 5.0
    #: Seconds to keep reading after the agent exited while a process it left
    #: behind still holds its stdout open.
    drain: float = 2.0
    tick_interval: float = 0.1
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    #: Trace id of events that carry none (default: the command's name).
    trace_id: str | None = None
    cwd: str | None = None
    env: dict[str, str] | None = None
    #: ``--decisions``: where guard decisions go (``-``: stdout); None: not written.
    decisions: str | None = None


class WrapSummary(msgspec.Struct, kw_only=True):
    """What a wrapped run did; ``exit_code`` is trajgrade's exit status."""

    exit_code: int = EXIT_OK
    pid: int = 0
    #: The agent's own exit status (negative: killed by that signal).
    agent_exit: int | None = None
    #: The verdict or guard decision that made trajgrade stop the agent.
    stopped_by: Verdict | GuardDecision | None = None
    #: Name of the signal sent to trajgrade that ended the run.
    interrupted: str | None = None
    events: int = 0
    traces: int = 0
    verdicts: dict[str, int] = msgspec.field(default_factory=dict)
    #: The first traces that did not pass, and how many did.
    failed_traces: list[str] = msgspec.field(default_factory=list)
    failed_count: int = 0
    input_errors: int = 0
    #: Whether the agent's output could not be written (reader gone).
    output_lost: bool = False
    #: Whether verdicts could not be written (reader gone).
    verdicts_lost: bool = False


class _Wrap:
    """One watched agent: grading state, the stop decision, pass-through."""

    def __init__(
        self,
        suite: Suite,
        options: WrapOptions,
        *,
        agent_out: IO[bytes],
        sink: Sink,
        log: Any,
        actions: Actions,
    ) -> None:
        self.engine = Engine(suite)
        self.grading = Grading(self.engine, decisions_inline=options.decisions == "-")
        self.options = options
        self.out = agent_out
        self.sink = sink
        self.log = log
        self.actions = actions
        self.marks = suite.on_fail
        self.stop_marks = STOP_ON[options.stop_on]
        self.clocked = any(g.uses_clock for g in suite.graders)
        self.summary = WrapSummary()
        self.proc: Any = None
        self.stopping: anyio.Event = anyio.Event()
        #: The signal that asked the agent to stop (SIGTERM for a stop).
        self.sent = "SIGTERM"
        self.output: AgentOutput | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._failed = FailedTraces()
        self._signals = 0
        self.decisions: DecisionWriter | None = None
        if options.decisions is not None:
            from trajgrade.sinks.decisions import open_decisions

            try:
                self.decisions = open_decisions(options.decisions)
            except OSError as exc:
                msg = f"cannot write guard decisions: {exc.strerror or exc}; check the path"
                raise SourceError(
                    msg, location=Location(file=options.decisions)
                ) from None

    # ------------------------------------------------------------ verdicts
    def emit(self, verdicts: Sequence[Verdict]) -> None:
        decisions = self.engine.decisions
        if decisions:
            taken = list(decisions)
            decisions.clear()
            self.emit(verdicts)
            self.decide(taken)
            return
        if not verdicts:
            return
        tally(verdicts, self.summary.verdicts, self._failed)
        self._write(verdicts)
        self.actions.observe(verdicts)
        if self.summary.stopped_by is None:
            for v in verdicts:
                if (
                    v.outcome is Outcome.FAIL
                    and self.marks.get(v.grader, OnFail.DENY) in self.stop_marks
                ):
                    self.stop(v)
                    break

    def _write(self, verdicts: Sequence[Verdict] | None) -> None:
        """Write (None: close) the verdicts' sink. A reader that went away
        loses the rest of them; the run goes on (the agent must not be
        taken down by it) and its status still counts every verdict."""
        if self.summary.verdicts_lost:
            return
        try:
            if verdicts is None:
                self.sink.close()
            else:
                self.sink.send(verdicts)
                self.sink.flush()
        except OSError as exc:
            self.summary.verdicts_lost = True
            self.log.warning(
                "verdicts_lost",
                reason=f"cannot write verdicts: {exc.strerror or exc}; the rest are counted, not written",
            )

    def decide(self, decisions: Sequence[GuardDecision]) -> None:
        """Act on guard decisions: a fail whose action is in ``--stop-on``
        stops the agent (a retried forbidden call too, whatever verdicts
        said before); shadow-mode and could-not-judge decisions are logged."""
        if self.decisions is not None:
            self.decisions.send(decisions)
        self.actions.observe_decisions(decisions)  # logs the warnings
        for d in decisions:
            if (
                d.outcome is Outcome.FAIL
                and OnFail(str(d.action)) in self.stop_marks
                and self.summary.stopped_by is None
            ):
                self.stop(d)

    def stop(self, v: Verdict | GuardDecision) -> None:
        """Stop the agent because of ``v``: SIGTERM now, SIGKILL after the grace."""
        if self.proc is None or group.exited(self.proc):
            return  # it ended on its own: a fail now is a graded fail
        self.summary.stopped_by = v
        self.log.warning(
            "agent_stopped",
            pid=self.proc.pid,
            trace=v.trace_id,
            grader=v.grader,
            on_fail=str(self.marks.get(v.grader, OnFail.DENY)),
            evidence=v.evidence if isinstance(v, Verdict) else v.reason,
            signal="SIGTERM",
            grace=self.options.grace,
        )
        group.kill_tree(self.proc.pid, signal.SIGTERM)
        self.stopping.set()
        if self.output is not None:
            self.output.ending()

    def report(self) -> None:
        errors, _ = report_problems(self.grading, self.log)
        self.summary.input_errors += errors

    # ------------------------------------------------------------ agent output
    async def pass_through(self, chunk: bytes) -> None:
        if self.summary.output_lost or self.output is None:
            return
        try:
            await self.output.write(chunk)
        except OutputAbandoned:
            self.summary.output_lost = True
            self.log.warning(
                "agent_output_lost",
                reason=f"the reader of the agent's output took no data for {self.options.drain:g}s after the agent exited; the rest is discarded",
            )
        except OSError as exc:
            # The reader of the agent's output went away: keep grading (and
            # keep the agent's stdout pipe drained) but stop writing.
            self.summary.output_lost = True
            self.log.warning(
                "agent_output_lost",
                reason=f"cannot write the agent's output: {exc.strerror or exc}; it is discarded from here on",
            )

    async def read(self, output: AgentOutput, decoder: SourceDecoder) -> None:
        grading = self.grading
        while (chunk := await output.receive()) is not None:
            now = time.time() if self.clocked else None
            # Grade first: a stop is decided before a slow reader of the
            # agent's output can hold us up. Part by part: a stop comes
            # before the rest of the chunk is graded, and a chunk that ends
            # thousands of traces never holds all their verdicts.
            for part in grading.feed_batches(decoder, decoder.feed(chunk), now=now):
                self.emit(part)
            if grading.errors or grading.anomalies:
                self.report()
            await self.pass_through(chunk)

    async def clock(self) -> None:
        while True:
            await anyio.sleep(self.options.tick_interval)
            self.emit(self.engine.tick(time.time()))

    async def escalate(self) -> None:
        """After a stop or a forwarded signal: SIGKILL the agent's group
        when the grace runs out (a supervisor that sends trajgrade one
        SIGTERM, then SIGKILL, must not leave the agent running)."""
        await self.stopping.wait()
        with anyio.move_on_after(self.options.grace):
            await self.proc.wait()
            return
        self.log.warning(
            "agent_killed",
            pid=self.proc.pid,
            reason=f"the agent did not exit within {self.options.grace:g}s of {self.sent}",
        )
        group.kill_tree(self.proc.pid, signal.SIGKILL)

    # ------------------------------------------------------------ signals
    def on_signal(self, signum: int, frame: Any) -> None:
        # A plain handler (not the loop's): it runs even while a write to a
        # stalled stdout blocks the loop. Forwarding is a syscall, safe here.
        self._signals += 1
        if self.summary.interrupted is None:
            self.summary.interrupted = signal.Signals(signum).name
        if self.proc is None:
            return
        if self._signals == 1:
            group.kill_group(self.proc.pid, signum)
            self.sent = signal.Signals(signum).name
            if self._loop is not None:
                # The grace timer and the output's end run in the loop.
                self._loop.call_soon_threadsafe(self._signalled)
        else:
            group.kill_tree(self.proc.pid, signal.SIGKILL)

    def on_job_stop(self, signum: int, frame: Any) -> None:
        group.suspend_with(None if self.proc is None else self.proc.pid, signum)

    def _signalled(self) -> None:
        self.stopping.set()
        if self.output is not None:
            self.output.ending()

    # ------------------------------------------------------------ the end
    def finish(self, returncode: int) -> WrapSummary:
        for verdicts in self.engine.finish_batches():
            self.emit(verdicts)
        self.engine.anomalies.clear()
        self._write(None)
        if self.decisions is not None:
            self.decisions.close()
        stats = self.engine.statistics()
        s = self.summary
        s.events = stats.events
        s.traces = stats.closed_traces
        s.failed_traces, s.failed_count = self._failed.first, self._failed.count
        s.agent_exit = returncode
        failed = any(s.verdicts.get(o, 0) for o in (Outcome.FAIL, Outcome.ERROR))
        if s.stopped_by is not None:
            s.exit_code = EXIT_STOPPED
        elif s.interrupted is not None:
            s.exit_code = 128 + int(signal.Signals[s.interrupted])
        elif returncode != 0:
            s.exit_code = EXIT_AGENT_FAILED
        elif not any(s.verdicts.values()):
            s.exit_code = EXIT_NOTHING  # its output held no events: no false green
        else:
            s.exit_code = EXIT_FAILED if failed else EXIT_OK
        return s


async def wrap(
    suite: Suite,
    options: WrapOptions,
    *,
    agent_out: IO[bytes],
    sink: Sink,
    log: Any,
    actions: ActionOptions | None = None,
) -> WrapSummary:
    """Run the agent to its end (or stop it); return what happened.

    Raises :class:`~trajgrade.errors.SourceError` when the agent cannot be
    started.
    """
    if not options.command:
        msg = "no agent command given; put it after --, e.g. trajgrade run -c policy.yaml -- claude -p ..."
        raise SourceError(msg)
    if options.stop_on not in STOP_ON:
        msg = f"unknown stop_on {options.stop_on!r}; use one of {', '.join(STOP_ON)}"
        raise ValueError(msg)
    acts = Actions(actions or ActionOptions(), log, marks=suite.on_fail)
    state = _Wrap(suite, options, agent_out=agent_out, sink=sink, log=log, actions=acts)
    name = os.path.basename(options.command[0])
    decoder = SourceDecoder(
        f"<{name}>",
        fmt=options.fmt,
        default_trace=options.trace_id or name,
        max_line_bytes=options.max_line_bytes,
        projection=suite.projection,
    )
    state._loop = asyncio.get_running_loop()  # anyio's backend here is asyncio
    previous = {s: signal.signal(s, state.on_signal) for s in _FORWARDED}
    previous |= {s: signal.signal(s, state.on_job_stop) for s in group.JOB_STOPS}
    try:
        try:
            proc = await anyio.open_process(
                options.command,
                stdin=None,
                stdout=-1,
                stderr=None,
                cwd=options.cwd,
                env=options.env,
                start_new_session=True,
            )
        except OSError as exc:
            msg = f"cannot start the agent: {exc.strerror or exc}; check the command after --"
            raise SourceError(msg, location=Location(file=options.command[0])) from None
        state.proc = proc
        state.summary.pid = proc.pid
        state.output = AgentOutput(proc.stdout, agent_out, drain=options.drain)
        if state.summary.interrupted is not None:
            # A signal arrived while the agent was starting: pass it on now.
            group.kill_group(proc.pid, signal.Signals[state.summary.interrupted])
            state._signalled()
        log.info("agent_started", pid=proc.pid, command=options.command)
        try:
            summary = await _watch(state, proc, decoder, state.output)
        finally:
            if proc.returncode is None:
                # Only on an error of ours: never leave the agent running unwatched.
                group.kill_tree(proc.pid, signal.SIGKILL)
            with anyio.CancelScope(shield=True):
                await proc.aclose()
            group.forget(proc.pid)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return summary


async def _watch(
    state: _Wrap, proc: Any, decoder: SourceDecoder, output: AgentOutput
) -> WrapSummary:
    """Grade the agent's output until it ends; then finish and drain actions."""
    acts, log = state.actions, state.log
    async with anyio.create_task_group() as tg:

        async def note_exit() -> None:
            # A process the agent left behind may hold its stdout open:
            # once the agent is gone, its output gets a moment, then ends.
            await proc.wait()
            output.agent_exited()

        tg.start_soon(acts.serve)
        tg.start_soon(state.escalate)
        tg.start_soon(note_exit)
        if state.clocked:
            tg.start_soon(state.clock)
        await state.read(output, decoder)
        for part in state.grading.feed_batches(decoder, decoder.close()):
            state.emit(part)
        state.report()
        returncode = await proc.wait()
        if state.summary.stopped_by is not None:
            # Tool processes that ignored SIGTERM must not outlive the stop.
            group.kill_tree(proc.pid, signal.SIGKILL)
        else:
            await group.stop_leftovers(proc.pid, state.options.grace, log)
        log.info("agent_exited", pid=proc.pid, exit_code=returncode)
        summary = state.finish(returncode)
        await acts.drain(acts.options.on_fail_timeout)
        tg.cancel_scope.cancel()
    return summary
