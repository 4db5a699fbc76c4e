"""On-fail actions: what a runner does, besides writing verdicts, when a trace fails.

Three actions, shared by every runner (``grade``, follow, Kafka, ``run``):

* ``--fail-fast``: stop at the first fail. :attr:`Actions.stop_requested`
  turns true; the runner stops reading, finishes the open traces and exits.
* ``--on-fail CMD``: run ``CMD`` through the shell once per failed *trace*
  (its first fail or error verdict), with that verdict as JSON on stdin and
  in ``TRAJGRADE_*`` environment variables. Commands run in the background
  (:meth:`Actions.serve`) with bounded concurrency and a timeout, each in its
  own process group so a timeout kills everything it started. A command
  that fails, hangs or cannot start is logged; it never stops the run.
* ``--signal PID[:SIGNAL]``: send SIGNAL (default SIGTERM) to PID, once, at
  the first fail.

What counts as a fail (decided once, here):

* ``--on-fail`` is a notification: a trace's first verdict with outcome
  ``fail`` *or* ``error`` (trajgrade could not decide: lost events, a regex
  timeout) runs it, whatever the grader's ``on_fail:`` marking.
* ``--fail-fast`` and ``--signal`` interfere with a run, so they follow the
  fail-open rule of the hooks: only outcome ``fail`` triggers them (an
  ``error`` is not evidence against the agent), and only from graders not
  marked ``on_fail: report`` or ``warn`` (shadow mode: reported, never
  acted on; see :class:`trajgrade.config.model.OnFail`). Guard decisions
  (:meth:`Actions.observe_decisions`) trigger them too: a ``deny``,
  ``ask`` or ``abort`` of a call or of the run; a ``warn`` decision is
  logged as a warning.
* Sealed verdicts (``final: false``) count: their outcome can no longer
  change, and budgets emit one the moment they are exceeded.

:meth:`Actions.observe` is synchronous and never blocks, so a runner calls it
right after flushing verdicts to its sink (a command never sees a verdict
the sink has not written). anyio is imported only where commands run, so
the CLI can import this module for its options at no cost (the options
themselves are :mod:`trajgrade.cli.action_options`).
"""

from __future__ import annotations

import os
import signal
from collections import deque
from typing import TYPE_CHECKING, Any, Final

import msgspec

from trajgrade.verdicts import GuardDecision, Outcome, Verdict

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from trajgrade.config.model import OnFail

__all__ = (
    "MAX_QUEUED",
    "ActionOptions",
    "Actions",
    "verdict_env",
)

#: Failed traces waiting for a free ``--on-fail`` slot; more are dropped and
#: counted (a flood of failing traces must not grow memory without bound).
MAX_QUEUED: Final = 10_000
#: Longest ``TRAJGRADE_*`` value; the full verdict is the stdin JSON.
ENV_EVIDENCE_MAX: Final = 4096
#: Seconds to wait for killed commands to be reaped at the end of a drain.
_REAP: Final = 5.0
_ENC: Final = msgspec.json.Encoder()
#: Markings / decision actions that are reported, never acted on.
_PASSIVE: Final = frozenset(("report", "warn"))


class ActionOptions(msgspec.Struct, kw_only=True):
    """The on-fail options of one run (see the module docstring)."""

    fail_fast: bool = False
    #: Shell command run once per failed trace.
    on_fail: str | None = None
    #: Seconds one command may run before its process group is killed.
    on_fail_timeout: float = 30.0
    #: Commands running at once; further failed traces wait their turn.
    on_fail_concurrency: int = 4
    #: (pid, signal number) pairs signalled once at the first fail.
    signal_targets: list[tuple[int, int]] = []

    @property
    def active(self) -> bool:
        """Whether any action is configured (runners may skip observing)."""
        return self.fail_fast or self.on_fail is not None or bool(self.signal_targets)


class Actions:
    """Carries out the on-fail actions of one run.

    ``marks`` maps grader names to their ``on_fail:`` marking
    (``Suite.on_fail``); graders marked ``report`` or ``warn`` never trip
    ``--fail-fast`` or ``--signal``. Without it every grader counts.
    """

    def __init__(
        self,
        options: ActionOptions,
        log: Any,
        *,
        marks: Mapping[str, OnFail] | None = None,
    ) -> None:
        self.options = options
        self.log = log
        self._marks = marks or {}
        self._notified: set[str] = set()
        self._queue: deque[Verdict] = deque()
        self._running: dict[int, Any] = {}
        self._stop: Verdict | GuardDecision | None = None
        self._signalled = False
        self._closing = False
        self._abandon = False
        self._serving = False
        self._wake: Any = None
        self._done: Any = None
        #: Counters for the closing log line and tests.
        self.commands_started = 0
        self.commands_failed = 0
        self.commands_dropped = 0

    # ------------------------------------------------------------ sync side
    @property
    def stop_requested(self) -> bool:
        """``--fail-fast`` tripped: stop reading, finish and exit."""
        return self._stop is not None

    @property
    def stop_reason(self) -> Verdict | GuardDecision | None:
        """The verdict or guard decision that tripped ``--fail-fast`` (None
        while nothing has)."""
        return self._stop

    def observe(self, verdicts: Sequence[Verdict]) -> None:
        """Act on verdicts the sink has flushed. Synchronous; never blocks."""
        opts = self.options
        for v in verdicts:
            if v.outcome is Outcome.PASS:
                continue
            if opts.on_fail is not None and v.trace_id not in self._notified:
                self._notified.add(v.trace_id)
                self._enqueue(v)
            if v.outcome is not Outcome.FAIL or self._marks.get(v.grader) in _PASSIVE:
                continue
            self._interfere(v, v.grader, v.evidence)

    def observe_decisions(self, decisions: Sequence[GuardDecision]) -> None:
        """Act on guard decisions (written to the decision stream first):
        a refusal or abort trips ``--signal``/``--fail-fast``; a ``warn``
        (shadow mode) is logged."""
        for d in decisions:
            if d.action in _PASSIVE or d.outcome is not Outcome.FAIL:
                if d.action == "warn" or d.outcome is Outcome.ERROR:
                    self.log.warning(
                        "guard_warning",
                        trace=d.trace_id,
                        grader=d.grader,
                        rule=d.rule,
                        call=d.call_id,
                        action=str(d.action),
                        outcome=str(d.outcome),
                        reason=d.reason,
                    )
                continue
            self._interfere(d, d.grader, d.reason)

    def _interfere(self, why: Verdict | GuardDecision, grader: str, text: str) -> None:
        opts = self.options
        if opts.signal_targets and not self._signalled:
            self._signalled = True
            self._send_signals(why)
        if opts.fail_fast and self._stop is None:
            self._stop = why
            self.log.warning(
                "fail_fast", trace=why.trace_id, grader=grader, evidence=text
            )

    def _enqueue(self, v: Verdict) -> None:
        if self._closing and self._abandon:
            self.commands_dropped += 1
            return
        if len(self._queue) >= MAX_QUEUED:
            self.commands_dropped += 1
            self.log.warning(
                "on_fail_dropped",
                trace=v.trace_id,
                reason=f"more than {MAX_QUEUED} failed traces wait for --on-fail; raise --on-fail-concurrency or make the command faster",
            )
            return
        self._queue.append(v)
        if self._wake is not None:
            self._wake.set()

    def _send_signals(self, v: Verdict | GuardDecision) -> None:
        for pid, signum in self.options.signal_targets:
            name = signal.Signals(signum).name
            try:
                os.kill(pid, signum)
            except OSError as exc:
                self.log.error(
                    "signal_failed",
                    pid=pid,
                    signal=name,
                    reason=f"{exc.strerror or exc}; check the PID given to --signal",
                )
                continue
            self.log.warning(
                "signal_sent", pid=pid, signal=name, trace=v.trace_id, grader=v.grader
            )

    # ------------------------------------------------------------ async side
    async def serve(self, *, task_status: Any = None) -> None:
        """Run queued ``--on-fail`` commands until :meth:`drain` ends the run.

        Start it in the runner's task group. If that group is cancelled first,
        running commands are killed and the queue is kept for :meth:`drain`.
        """
        if self.options.on_fail is None or self._serving:
            if task_status is not None:
                task_status.started()
            return
        import anyio

        self._serving = True
        self._done = anyio.Event()
        if task_status is not None:
            task_status.started()
        # A semaphore, not a CapacityLimiter: the slot is released by the
        # command's task, not by this loop that took it.
        slots = anyio.Semaphore(max(1, self.options.on_fail_concurrency))
        try:
            async with anyio.create_task_group() as tg:
                while True:
                    while self._queue and not self._abandon:
                        await slots.acquire()
                        if not self._queue or self._abandon:
                            slots.release()
                            break
                        tg.start_soon(self._run_one, self._queue.popleft(), slots)
                    if self._closing:
                        break
                    self._wake = anyio.Event()
                    if not self._queue:
                        await self._wake.wait()
        finally:
            self._serving = False
            self._done.set()

    async def drain(self, timeout: float) -> None:  # noqa: ASYNC109 - the runners' agreed interface
        """At shutdown: let queued and running commands finish within
        ``timeout`` seconds, then kill what still runs and drop the rest.

        Works whether :meth:`serve` is running, never ran, or was cancelled.
        """
        if self.options.on_fail is None:
            return
        import anyio

        self._closing = True
        if self._wake is not None:
            self._wake.set()
        async with anyio.create_task_group() as tg:
            if not self._serving:
                await tg.start(self.serve)
            with anyio.move_on_after(timeout) as scope:
                await self._done.wait()
            if not scope.cancelled_caught:
                return
            self._abandon = True
            left = len(self._queue)
            self._queue.clear()
            self.commands_dropped += left
            self.log.warning(
                "on_fail_abandoned",
                running=len(self._running),
                queued=left,
                reason=f"--on-fail commands still busy {timeout:g}s after the run ended were killed",
            )
            for proc in list(self._running.values()):
                _kill_group(proc.pid, signal.SIGKILL)
            with anyio.move_on_after(_REAP):
                await self._done.wait()

    async def _run_one(self, v: Verdict, slots: Any) -> None:
        import anyio

        opts = self.options
        assert opts.on_fail is not None
        env = {**os.environ, **verdict_env(v, self._marks.get(v.grader))}
        self.commands_started += 1
        try:
            try:
                proc = await anyio.open_process(
                    opts.on_fail,
                    stdin=-1,
                    stdout=2,  # stdout may be the verdict channel: never write there
                    stderr=None,
                    env=env,
                    start_new_session=True,
                )
            except OSError as exc:
                self.commands_failed += 1
                self.log.error(
                    "on_fail_failed",
                    trace=v.trace_id,
                    reason=f"cannot start --on-fail command: {exc.strerror or exc}",
                )
                return
            self._running[id(proc)] = proc
            try:
                await self._feed_and_wait(proc, v, opts.on_fail_timeout)
            finally:
                del self._running[id(proc)]
                with anyio.CancelScope(shield=True):
                    if proc.returncode is None:
                        # Cancelled (the runner's group ended): leave nothing behind.
                        _kill_group(proc.pid, signal.SIGKILL)
                        await proc.wait()
                    await proc.aclose()
        finally:
            slots.release()

    async def _feed_and_wait(self, proc: Any, v: Verdict, limit: float) -> None:
        import anyio

        with anyio.move_on_after(limit) as scope:
            try:
                await proc.stdin.send(_ENC.encode(v) + b"\n")
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                pass  # the command does not read stdin: fine
            await proc.stdin.aclose()
            code = await proc.wait()
        if scope.cancelled_caught:
            _kill_group(proc.pid, signal.SIGKILL)
            await proc.wait()
            self.commands_failed += 1
            self.log.warning(
                "on_fail_timeout",
                trace=v.trace_id,
                pid=proc.pid,
                reason=f"--on-fail command ran longer than {limit:g}s and was killed; raise --on-fail-timeout if it needs longer",
            )
            return
        if code != 0:
            self.commands_failed += 1
            self.log.warning(
                "on_fail_failed",
                trace=v.trace_id,
                exit_code=code,
                reason="--on-fail command exited with a non-zero status",
            )
        else:
            self.log.debug("on_fail_done", trace=v.trace_id)


def _kill_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except OSError:
        pass  # already gone


def verdict_env(v: Verdict, mark: str | None = None) -> dict[str, str]:
    """The ``TRAJGRADE_*`` variables an ``--on-fail`` command gets.

    Every value is bounded (:data:`ENV_EVIDENCE_MAX` characters): the kernel
    refuses to start a command with one environment string over 128 KiB
    (E2BIG), and a trace id is input. The whole verdict, unabridged, is the
    JSON on the command's stdin; ``TRAJGRADE_TRUNCATED`` names the variables
    that were cut.
    """
    env = {
        "TRAJGRADE_TRACE_ID": v.trace_id,
        "TRAJGRADE_GRADER": v.grader,
        "TRAJGRADE_KIND": v.kind,
        "TRAJGRADE_OUTCOME": str(v.outcome),
        "TRAJGRADE_SCORE": repr(v.score),
        "TRAJGRADE_FINAL": "1" if v.final else "0",
        "TRAJGRADE_EVIDENCE": v.evidence,
        "TRAJGRADE_VERDICT_ID": v.id,
    }
    if mark is not None:
        env["TRAJGRADE_ON_FAIL"] = str(mark)
    cut = []
    for name, value in env.items():
        value = value.replace("\0", "")  # an environment string cannot hold NUL
        if len(value) > ENV_EVIDENCE_MAX:
            value = value[: ENV_EVIDENCE_MAX - 1] + "…"
            cut.append(name)
        env[name] = value
    if cut:
        env["TRAJGRADE_TRUNCATED"] = ",".join(cut)
    return env
