"""``--export-otlp URL``: verdicts (and guard decisions) as OTel evaluation events.

Each verdict becomes one OTLP log record with event name
``gen_ai.evaluation.result`` and the GenAI semantic conventions' evaluation
attributes: ``gen_ai.evaluation.name`` (the grader), ``.score.value``,
``.score.label`` (the outcome) and ``.explanation`` (the evidence), plus
``trajgrade.*`` attributes (grader type, verdict id, final, early; the
input file and line, ``trajgrade.source.*``; what matched,
``trajgrade.matched.*``: rule, tool, field, value, call id). The
record's ``trace_id`` is set when the graded trace id is an OTel trace id
(32 hex digits, as the ``otel`` span format names traces); an agent's
session id is kept as the ``trajgrade.trace_id`` attribute either way. The
resource says ``service.name=trajgrade``. A guard decision is the same
event with its action as the label and its reason as the explanation.

Why not the OpenTelemetry SDK: its logs SDK and OTLP exporter pull in
``requests`` and the SDK's provider machinery (~150 ms of imports) for what
is one protobuf message POSTed in batches; the messages come from
``opentelemetry-proto`` and the POST from the standard library's
``http.client``.

Delivery never blocks grading: :meth:`EvaluationExporter.send` only appends
to a bounded queue (a full queue drops the record, counts it:
``trajgrade_export_dropped``, and logs ``otlp_export_queue_full`` at most
every 10 s); a daemon thread sends batches of up to ``batch`` records every
``interval`` seconds (sooner when a batch is full), retrying 429/502/503/504
and connection errors with exponential backoff (honouring ``Retry-After``,
capped at 30 s) up to ``attempts`` times. Records a collector rejects in a
200 (OTLP partial success) are dropped, not retried. ``close`` gives the
queue ``close_timeout`` seconds to drain, cutting back-offs short; a batch
still in flight then (a collector that does not answer) is counted as
dropped: nothing undelivered goes uncounted.
"""

from __future__ import annotations

import gzip
import http.client
import re
import threading
import time
import urllib.parse
from collections import deque
from typing import TYPE_CHECKING, Any, Final

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    InstrumentationScope,
    KeyValue,
)
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from trajgrade._version import __version__
from trajgrade.verdicts import GuardDecision, Matched, Outcome, Verdict

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

__all__ = ("EVENT_NAME", "EvaluationExporter", "decision_record", "verdict_record")

EVENT_NAME: Final = "gen_ai.evaluation.result"
_RETRYABLE: Final = frozenset({429, 502, 503, 504})
#: Longest wait between two attempts, whatever a Retry-After asks for.
_MAX_BACKOFF: Final = 30.0
#: Seconds between two ``otlp_export_queue_full`` log lines.
_FULL_LOG_EVERY: Final = 10.0
#: An HTTP header name (RFC 9110 token) and a value without CR, LF or NUL.
_HEADER_NAME: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_BAD_VALUE: Final = re.compile(r"[\r\n\0]")
#: Severity of a record by outcome: INFO for pass, WARN for fail, ERROR for error.
_SEVERITY: Final = {
    Outcome.PASS: (9, "INFO"),
    Outcome.FAIL: (13, "WARN"),
    Outcome.ERROR: (17, "ERROR"),
}


def _kv(key: str, value: str | float) -> KeyValue:
    if isinstance(value, bool):
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    if isinstance(value, float):
        return KeyValue(key=key, value=AnyValue(double_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))


def _trace_bytes(trace_id: str) -> bytes:
    """The OTel trace id, when the graded trace is named by one."""
    if len(trace_id) == 32:
        try:
            raw = bytes.fromhex(trace_id)
        except ValueError:
            return b""
        return raw if any(raw) else b""
    return b""


def _record(
    trace_id: str, ts: float | None, outcome: Outcome, attrs: list[KeyValue]
) -> LogRecord:
    now = time.time_ns()
    number, text = _SEVERITY[outcome]
    return LogRecord(
        time_unix_nano=int(ts * 1e9) if ts else now,
        observed_time_unix_nano=now,
        severity_number=number,  # type: ignore[arg-type]
        severity_text=text,
        event_name=EVENT_NAME,
        trace_id=_trace_bytes(trace_id),
        attributes=[_kv("trajgrade.trace_id", trace_id), *attrs],
    )


def verdict_record(v: Verdict) -> LogRecord:
    """One verdict as a ``gen_ai.evaluation.result`` log record."""
    attrs = [
        _kv("gen_ai.evaluation.name", v.grader),
        _kv("gen_ai.evaluation.score.value", float(v.score)),
        _kv("gen_ai.evaluation.score.label", v.outcome.value),
        _kv("trajgrade.grader.type", v.kind),
        _kv("trajgrade.verdict.id", v.id),
        _kv("trajgrade.verdict.final", v.final),
        _kv("trajgrade.verdict.early", v.early),
        _kv("trajgrade.at_event", v.at_event),
    ]
    if v.evidence:
        attrs.append(_kv("gen_ai.evaluation.explanation", v.evidence))
    if v.source is not None:
        attrs.append(_kv("trajgrade.source.file", v.source.file))
        if v.source.line is not None:
            attrs.append(_kv("trajgrade.source.line", v.source.line))
    attrs += _matched(v.matched)
    return _record(v.trace_id, v.ts, v.outcome, attrs)


def _matched(m: Matched | None) -> list[KeyValue]:
    """``trajgrade.matched.*``: what matched, field by field (docs/verdicts.md)."""
    if m is None:
        return []
    fields = {
        "rule": m.rule,
        "tool": m.tool,
        "field": m.field,
        "value": m.value,
        "call_id": m.call_id,
        "line": m.line,
    }
    return [
        _kv(f"trajgrade.matched.{k}", v) for k, v in fields.items() if v is not None
    ]


def decision_record(d: GuardDecision) -> LogRecord:
    """One guard decision as a ``gen_ai.evaluation.result`` log record."""
    attrs = [
        _kv("gen_ai.evaluation.name", d.grader),
        _kv("gen_ai.evaluation.score.value", 1.0 if d.outcome is Outcome.PASS else 0.0),
        _kv("gen_ai.evaluation.score.label", d.action.value),
        _kv("gen_ai.evaluation.explanation", d.reason),
        _kv("trajgrade.grader.type", d.kind),
        _kv("trajgrade.guard.rule", d.rule),
        _kv("trajgrade.at_event", d.at_event),
    ]
    if d.call_id is not None:
        attrs.append(_kv("gen_ai.tool.call.id", d.call_id))
    if d.tool is not None:
        attrs.append(_kv("gen_ai.tool.name", d.tool))
    attrs += _matched(d.matched)
    return _record(d.trace_id, d.ts, d.outcome, attrs)


class EvaluationExporter:
    """A sink: verdicts to an OTLP/HTTP logs endpoint, in the background."""

    def __init__(
        self,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        queue_size: int = 10_000,
        batch: int = 512,
        interval: float = 1.0,
        attempts: int = 5,
        timeout: float = 10.0,
        close_timeout: float = 5.0,
        log: Any = None,
    ) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            msg = f"--export-otlp {url!r}: expected an http(s) URL such as http://127.0.0.1:4318"
            raise ValueError(msg)
        for key, value in (headers or {}).items():
            if not _HEADER_NAME.fullmatch(key) or _BAD_VALUE.search(value):
                msg = f"--export-otlp-header {key!r}: not an HTTP header name and value (a token, and no line breaks)"
                raise ValueError(msg)
        path = parts.path.rstrip("/")
        self._path = path if path.endswith("/v1/logs") else f"{path}/v1/logs"
        self._parts = parts
        self._headers = {
            "Content-Type": "application/x-protobuf",
            "Content-Encoding": "gzip",
            **(headers or {}),
        }
        self._queue: deque[LogRecord] = deque()
        self._size = queue_size
        self._batch = batch
        self._interval = interval
        self._attempts = attempts
        self._timeout = timeout
        self._close_timeout = close_timeout
        self._log = log
        self._cond = threading.Condition()
        self._closing = False
        self._conn: http.client.HTTPConnection | None = None
        #: Records dropped (queue full, rejected, or given up), and sent;
        #: changed under ``_cond`` (two threads count).
        self.dropped = 0
        self.sent = 0
        #: The batch being delivered, and whether close() gave up on it.
        self._inflight = 0
        self._abandoned = False
        self._full_logged = -_FULL_LOG_EVERY
        self._resource = Resource(
            attributes=[
                _kv("service.name", "trajgrade"),
                _kv("service.version", __version__),
            ]
        )
        self._scope = InstrumentationScope(name="trajgrade", version=__version__)
        self._thread = threading.Thread(
            target=self._run, name="otlp-export", daemon=True
        )
        self._thread.start()

    # ------------------------------------------------------------ Sink
    def send(self, verdicts: Sequence[Verdict]) -> None:
        self.enqueue(verdict_record(v) for v in verdicts)

    def send_decisions(self, decisions: Sequence[GuardDecision]) -> None:
        """Guard decisions, as the engine emits them."""
        self.enqueue(decision_record(d) for d in decisions)

    def enqueue(self, records: Iterable[LogRecord]) -> None:
        full = 0
        with self._cond:
            q = self._queue
            for r in records:
                if len(q) >= self._size:
                    full += 1
                else:
                    q.append(r)
            self.dropped += full
            if len(q) >= self._batch:
                self._cond.notify()
        now = time.monotonic()
        if full and now - self._full_logged >= _FULL_LOG_EVERY:
            self._full_logged = now
            self._warn(
                "otlp_export_queue_full",
                queue_size=self._size,
                dropped_total=self.dropped,
                reason="the collector does not keep up (or is down): records are dropped; see trajgrade_export_dropped_total",
            )

    def flush(self) -> None:
        pass  # delivery is asynchronous by design: grading never waits for it

    def close(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join(self._close_timeout)
        if not self._thread.is_alive() and self._conn is not None:
            self._conn.close()
            self._conn = None
        with self._cond:
            lost = len(self._queue)
            self._queue.clear()
            if self._thread.is_alive() and self._inflight:
                # Stuck on a collector that does not answer: given up on.
                self._abandoned = True
                lost += self._inflight
            self.dropped += lost
        if lost:
            self._warn("otlp_export_failed", records=lost, status="closed")
        if self._log is not None:
            self._log.info("otlp_export_finished", sent=self.sent, dropped=self.dropped)

    def _warn(self, event: str, **fields: Any) -> None:
        if self._log is not None:
            self._log.warning(event, **fields)

    # ------------------------------------------------------------ metrics
    def collect(self) -> Iterable[Any]:
        """prometheus-client collector protocol: the exporter's counters."""
        from prometheus_client.core import CounterMetricFamily

        yield CounterMetricFamily(
            "trajgrade_export_dropped",
            "Evaluation records dropped by --export-otlp (queue full or undeliverable).",
            value=self.dropped,
        )
        yield CounterMetricFamily(
            "trajgrade_export_sent",
            "Evaluation records delivered by --export-otlp.",
            value=self.sent,
        )

    # ------------------------------------------------------------ thread
    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._queue and not self._closing:
                    self._cond.wait(self._interval)
                if not self._queue and self._closing:
                    return
                n = min(len(self._queue), self._batch)
                batch = [self._queue.popleft() for _ in range(n)]
                self._inflight = n
            if batch:
                try:
                    self._deliver(batch)
                except Exception as exc:  # (the delivery thread must live on)
                    if self._count(dropped=len(batch)):
                        self._warn(
                            "otlp_export_failed",
                            records=len(batch),
                            status=f"{type(exc).__name__}: {exc}",
                        )

    def _count(self, *, sent: int = 0, dropped: int = 0) -> bool:
        """Account for the batch in flight; False when close() already did."""
        with self._cond:
            self._inflight = 0
            if self._abandoned:
                return False
            self.sent += sent
            self.dropped += dropped
            return True

    def _backoff(self, seconds: float) -> None:
        """Wait before a retry, cut short when the exporter closes (the
        retries left then go at once: a collector that said "later" at
        shutdown still gets them, within ``close_timeout``)."""
        with self._cond:
            self._cond.wait_for(lambda: self._closing, timeout=seconds)

    def _deliver(self, batch: list[LogRecord]) -> None:
        request = ExportLogsServiceRequest(
            resource_logs=[
                ResourceLogs(
                    resource=self._resource,
                    scope_logs=[ScopeLogs(scope=self._scope, log_records=batch)],
                )
            ]
        )
        body = gzip.compress(request.SerializeToString(), compresslevel=5)
        delay = 0.5
        for attempt in range(1, self._attempts + 1):
            status, retry_after, answer = self._post(body)
            if 200 <= status < 300:
                self._delivered(len(batch), answer)
                return
            if status and status not in _RETRYABLE:
                break
            wait = min(retry_after if retry_after is not None else delay, _MAX_BACKOFF)
            if attempt < self._attempts:
                self._backoff(wait)
            delay = min(delay * 2, _MAX_BACKOFF)
        if self._count(dropped=len(batch)):
            self._warn("otlp_export_failed", records=len(batch), status=status)

    def _delivered(self, records: int, answer: bytes) -> None:
        """A 2xx: its records are sent, but those its partial success names."""
        rejected, reason = 0, ""
        if answer:
            resp = ExportLogsServiceResponse()
            try:
                resp.ParseFromString(answer)
            except DecodeError:
                pass  # a body that is not the response: the 2xx still stands
            else:
                rejected = min(resp.partial_success.rejected_log_records, records)
                reason = resp.partial_success.error_message
        if self._count(sent=records - rejected, dropped=rejected) and rejected:
            self._warn("otlp_export_partial", rejected=rejected, reason=reason)

    def _post(self, body: bytes) -> tuple[int, float | None, bytes]:
        """(status, Retry-After seconds, body); status 0 when the connection failed."""
        try:
            conn = self._connection()
            conn.request("POST", self._path, body=body, headers=self._headers)
            resp = conn.getresponse()
            answer = resp.read()
        except (OSError, http.client.HTTPException):
            if self._conn is not None:
                self._conn.close()
            self._conn = None
            return 0, None, b""
        retry = resp.getheader("Retry-After")
        after = float(retry) if retry and retry.isdigit() else None
        return resp.status, after, answer

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            p = self._parts
            cls = (
                http.client.HTTPSConnection
                if p.scheme == "https"
                else http.client.HTTPConnection
            )
            self._conn = cls(p.hostname or "", p.port, timeout=self._timeout)
        return self._conn
