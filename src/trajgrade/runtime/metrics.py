"""Prometheus metrics and a health endpoint for long-running graders.

One :class:`Metrics` object per process holds the counters and gauges in its
own registry (not prometheus-client's global one, so tests and embedders can
make several), and :meth:`Metrics.serve` exposes them over HTTP on a daemon
thread:

* ``GET /metrics``  Prometheus text format;
* ``GET /healthz``  200 ``ok`` while the grading loop has made progress within
  ``stall_after`` seconds, else 503 (a liveness probe: a wedged loop restarts);
* ``GET /readyz``   200 once :meth:`Metrics.set_ready` was called with True
  (a Kafka runner: joined its group and restored its partitions), else 503.

The server binds to loopback unless told otherwise: metrics name traces and
topics, which is not something to publish to every interface by default.
Nothing here knows about Kafka; the Kafka runner fills the Kafka-only series
(lag, rebalances) and a local runner can use the rest as they are.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Final

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    generate_latest,
)

from trajgrade.runtime.http_edge import EdgeHandler, EdgeServer, Limits, bind_error
from trajgrade.verdicts import Outcome

if TYPE_CHECKING:
    from collections.abc import Iterable

    from trajgrade.verdicts import Verdict

__all__ = ("DEFAULT_METRICS_HOST", "Metrics", "MetricsServer")

#: Loopback: exposing metrics on every interface is an explicit choice.
DEFAULT_METRICS_HOST: Final = "127.0.0.1"


class Metrics:
    """The series a grading process exports, in a private registry."""

    def __init__(self, *, stall_after: float = 60.0) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.events = Counter(
            "trajgrade_events", "Events graded (rate() gives events/s).", registry=r
        )
        self.records = Counter(
            "trajgrade_records", "Input records read.", ["source"], registry=r
        )
        self.input_errors = Counter(
            "trajgrade_input_errors",
            "Input records rejected (undecodable or invalid).",
            registry=r,
        )
        self.dropped_events = Counter(
            "trajgrade_dropped_events",
            "Events not graded, by reason: after_trace_end (the trace had "
            "ended), after_final_verdicts (every grader of the trace was final), "
            "rejected_record (undecodable or invalid input).",
            ["reason"],
            registry=r,
        )
        self._dropped_seen: dict[str, int] = {}
        self.verdicts = Counter(
            "trajgrade_verdicts",
            "Final verdicts by outcome.",
            ["outcome"],
            registry=r,
        )
        self.early_fails = Counter(
            "trajgrade_early_fails",
            "Fail verdicts (sealed or final) decided before their trace ended.",
            registry=r,
        )
        self.open_traces = Gauge(
            "trajgrade_open_traces", "Traces open (state in memory).", registry=r
        )
        self.evicted_traces = Counter(
            "trajgrade_evicted_traces",
            "Traces closed early because --max-open-traces was reached.",
            registry=r,
        )
        self.expired_traces = Counter(
            "trajgrade_expired_traces",
            "Traces closed by --idle-timeout.",
            registry=r,
        )
        self.split_traces = Counter(
            "trajgrade_split_traces",
            "Traces seen on more than one partition (graded as error).",
            registry=r,
        )
        self.consumer_lag = Gauge(
            "trajgrade_consumer_lag",
            "Records between the high watermark and the next record to grade.",
            ["topic", "partition"],
            registry=r,
        )
        self.checkpoint_age = Gauge(
            "trajgrade_checkpoint_age_seconds",
            "Seconds since positions and state were last committed.",
            registry=r,
        )
        self.checkpoint_age.set_function(self._checkpoint_age)
        self.rebalances = Counter(
            "trajgrade_rebalances",
            "Partition assignments received.",
            registry=r,
        )
        self.restored_traces = Counter(
            "trajgrade_restored_traces",
            "Open traces restored from a changelog.",
            registry=r,
        )
        self.state_lost_traces = Counter(
            "trajgrade_state_lost_traces",
            "Open traces whose state or input the broker lost (their open graders end in error).",
            registry=r,
        )
        self._stall_after = stall_after
        self._last_progress = time.monotonic()
        self._last_checkpoint: float | None = None
        self._ready = False

    # ------------------------------------------------------------ updates
    def progress(self) -> None:
        """The loop is alive (called once per iteration, records or not)."""
        self._last_progress = time.monotonic()

    def checkpointed(self) -> None:
        """Positions and state were committed just now."""
        self._last_checkpoint = time.monotonic()

    def set_ready(self, ready: bool) -> None:
        """Ready to grade (joined, state restored) or not (shutting down)."""
        self._ready = ready

    def sync_dropped(self, counts: dict[str, int]) -> None:
        """Bring ``trajgrade_dropped_events`` up to running totals by reason."""
        seen = self._dropped_seen
        for reason, total in counts.items():
            if total > seen.get(reason, 0):
                self.dropped_events.labels(reason).inc(total - seen.get(reason, 0))
                seen[reason] = total

    def count_verdicts(self, verdicts: Iterable[Verdict]) -> None:
        """Count final verdicts by outcome, and fail verdicts decided early."""
        for v in verdicts:
            if v.final:
                self.verdicts.labels(str(v.outcome)).inc()
            if v.early and v.outcome is Outcome.FAIL:
                self.early_fails.inc()

    # ------------------------------------------------------------ queries
    @property
    def healthy(self) -> bool:
        """True while the loop made progress recently."""
        return time.monotonic() - self._last_progress < self._stall_after

    @property
    def ready(self) -> bool:
        """True once the runner said so."""
        return self._ready

    def exposition(self) -> bytes:
        """The Prometheus text format of every series."""
        return generate_latest(self.registry)

    def _checkpoint_age(self) -> float:
        if self._last_checkpoint is None:
            return 0.0
        return time.monotonic() - self._last_checkpoint

    # ------------------------------------------------------------ serving
    def serve(self, port: int, *, host: str = DEFAULT_METRICS_HOST) -> MetricsServer:
        """Serve /metrics, /healthz and /readyz on a daemon thread; a
        :class:`~trajgrade.errors.BindError` naming the address and the fix
        when it cannot be bound."""
        try:
            return MetricsServer(self, host=host, port=port)
        except OSError as exc:
            error = bind_error("--metrics-port", host, port, exc)
            raise error from None


class MetricsServer:
    """A small HTTP server on its own daemon thread; :meth:`close` stops it.

    It is trajgrade's hardened edge (:mod:`trajgrade.runtime.http_edge`): the probes
    are served here, so a peer that opens connections and sends nothing, or
    drips a request, holds a thread for ``timeout`` seconds at most, not for
    ever (which could starve the probes and get the process restarted).
    """

    def __init__(
        self, metrics: Metrics, *, host: str, port: int, timeout: float = 30.0
    ) -> None:
        self._httpd = EdgeServer(
            (host, port),
            _handler_for(metrics),
            limits=Limits(max_body=0, timeout=timeout, body_timeout=timeout),
            # The address is the operator's explicit --metrics-host.
            allow_remote=True,
            what="the metrics server",
        )
        #: The bound port (useful when ``port`` was 0).
        self.port: int = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="trajgrade-metrics", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        """Stop serving and release the port."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


def _handler_for(metrics: Metrics) -> type[EdgeHandler]:
    class Handler(EdgeHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self.reply(200, metrics.exposition(), content_type=CONTENT_TYPE_LATEST)
            elif path == "/healthz":
                ok = metrics.healthy
                self.reply(200 if ok else 503, b"ok\n" if ok else b"stalled\n")
            elif path == "/readyz":
                ok = metrics.ready
                self.reply(200 if ok else 503, b"ready\n" if ok else b"not ready\n")
            else:
                msg = b"not found: try /metrics, /healthz or /readyz\n"
                self.reply(404, msg)

    return Handler
