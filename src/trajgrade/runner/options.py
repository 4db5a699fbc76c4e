"""How a grading run runs: its inputs, clock, live mode, state and outputs."""

from __future__ import annotations

from typing import Any

import msgspec

from trajgrade.pipeline.decoder import DEFAULT_MAX_LINE_BYTES
from trajgrade.telemetry import OtlpOptions

__all__ = ("RunOptions",)


class RunOptions(msgspec.Struct, kw_only=True):
    """How to run (from the CLI or a caller)."""

    inputs: list[str]
    fmt: str = "auto"
    #: ``event``: wall-time uses event timestamps only; ``wall``: also the
    #: runner's clock; ``auto``: ``wall`` for pipes, terminals and followed
    #: files, ``event`` for regular files read once.
    clock: str = "auto"
    tick_interval: float = 0.1
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    #: Dataset rows by trace id (``--dataset``).
    samples: dict[str, Any] | None = None
    #: Trace id of events that carry none (``--trace-id``), see
    #: :func:`trajgrade.sources.stream.trace_name`.
    trace_template: str = "{path}"
    #: Follow ``inputs`` as they grow (``tail -F``) instead of reading them once.
    follow: bool = False
    #: Directories to watch for new session files, each with its glob.
    watch: list[tuple[str, str]] = msgspec.field(default_factory=list)
    #: Close a trace after this many seconds of the runner's clock without an
    #: event (live sources); None: only end events and end of input close.
    idle_timeout: float | None = None
    #: Checkpoint directory (``--state``); None: no durable state.
    state_dir: str | None = None
    checkpoint_interval: float = 5.0
    #: Serve Prometheus ``/metrics`` and ``/healthz`` here (``--metrics-port``).
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    #: ``--decisions``: where guard decisions go (``-``: stdout); None: dropped.
    decisions: str | None = None
    #: ``--export-decisions``: guard decisions also go to the grading outputs
    #: (``--export-otlp``, ``--verdicts-topic``); off, those carry verdicts only.
    export_decisions: bool = False
    #: ``--project-root``: the directory of calls whose log names none (what
    #: ``project_path`` filters match paths relative to).
    project_root: str | None = None
    #: Receive OTLP/HTTP here (``--otlp``), as a live input.
    otlp: OtlpOptions | None = None

    @property
    def idle_scan_interval(self) -> float:
        """Seconds between looks for idle traces: every tick, but no more
        often than a tenth of the timeout (at most a second apart). A look
        visits every open trace; ten a second with 100 k open took 8 % of a
        core, and a trace closed 0.3 s after a 3 s timeout is as good."""
        idle = self.idle_timeout
        if idle is None:
            return self.tick_interval
        return max(self.tick_interval, min(idle / 10, 1.0))

    @property
    def live(self) -> bool:
        """Inputs are followed (or received) rather than read once."""
        return self.follow or bool(self.watch) or self.otlp is not None
