"""``grade``'s telemetry options: ``--otlp`` (and its limits), ``--export-otlp``
and ``--junit``, as one decorator; the command asks
:func:`current_telemetry` for them and :func:`wire` applies them to the run's
options and sink, so ``cli.py`` grows by a few lines only."""

from __future__ import annotations

import functools
import sys
from typing import TYPE_CHECKING, Any, Final, TypeVar

import click
import msgspec

from trajgrade.cli.http_options import edge_limits, http_limit_options
from trajgrade.cli.types import require_companions
from trajgrade.runtime.exit_status import EXIT_USAGE
from trajgrade.telemetry import OtlpOptions

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from trajgrade.runner.options import RunOptions
    from trajgrade.sinks import Sink
    from trajgrade.verdicts import GuardDecision, Verdict

__all__ = ("TeeSink", "Telemetry", "current_telemetry", "telemetry_options", "wire")

F = TypeVar("F", bound="Callable[..., Any]")
_META_KEY: Final = "trajgrade.telemetry"
#: The receiver's default port: OTLP/HTTP's registered port.
OTLP_HTTP_PORT: Final = 4318


class Telemetry(msgspec.Struct, frozen=True, kw_only=True):
    otlp: OtlpOptions | None = None
    export_url: str | None = None
    export_headers: dict[str, str] = msgspec.field(default_factory=dict)
    junit: str | None = None


def _address(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = value, str(OTLP_HTTP_PORT)
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        msg = f"--otlp {value!r}: expected HOST:PORT, e.g. 127.0.0.1:4318 (port 0: any free one)"
        raise click.UsageError(msg)
    return host, int(port)


def _headers(values: Sequence[str]) -> dict[str, str]:
    out = {}
    for v in values:
        key, sep, val = v.partition("=")
        if not sep or not key.strip():
            msg = f"--export-otlp-header {v!r}: expected KEY=VALUE"
            raise click.UsageError(msg)
        out[key.strip()] = val.strip()
    return out


_OPTIONS: Final = [
    click.option(
        "--otlp",
        "otlp",
        metavar="HOST:PORT",
        default=None,
        help="Receive agents' OpenTelemetry over OTLP/HTTP here (/v1/logs, /v1/traces; protobuf or JSON) and grade it live. Loopback unless --otlp-allow-remote.",
    ),
    click.option(
        "--otlp-allow-remote",
        is_flag=True,
        help="Let --otlp listen on a non-loopback address (set --otlp-token-env too).",
    ),
    click.option(
        "--otlp-queue",
        type=click.IntRange(min=1),
        default=64,
        show_default=True,
        help="OTLP requests waiting for the grader; past it, 503 + Retry-After.",
    ),
    http_limit_options("otlp-"),
    click.option(
        "--export-otlp",
        "export_url",
        metavar="URL",
        default=None,
        help="Send every verdict as an OTel gen_ai.evaluation.result log record to this OTLP/HTTP endpoint (e.g. http://127.0.0.1:4318).",
    ),
    click.option(
        "--export-otlp-header",
        "export_headers",
        metavar="KEY=VALUE",
        multiple=True,
        help="Extra HTTP header for --export-otlp (repeatable), e.g. an Authorization.",
    ),
    click.option(
        "--junit",
        "junit",
        type=click.Path(dir_okay=False),
        default=None,
        help="Write the final verdicts as JUnit XML here (a suite per trace, a case per grader).",
    ),
]
_NAMES: Final = (
    "otlp",
    "otlp_allow_remote",
    "otlp_queue",
    "otlp_max_body",
    "otlp_read_timeout",
    "otlp_token_env",
    "export_url",
    "export_headers",
    "junit",
)

#: Options that do nothing without another (a usage error, not ignored).
_COMPANIONS: Final = {
    **dict.fromkeys(
        (
            "otlp_allow_remote",
            "otlp_queue",
            "otlp_max_body",
            "otlp_read_timeout",
            "otlp_token_env",
        ),
        "otlp",
    ),
    "export_headers": "export_url",
}


def telemetry_options(command: F) -> F:
    """Add the telemetry options to a click command (see :func:`current_telemetry`)."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        require_companions(_COMPANIONS)
        v = {name: kwargs.pop(name) for name in _NAMES}
        otlp = None
        if v["otlp"] is not None:
            host, port = _address(v["otlp"])
            limits = edge_limits(
                v["otlp_max_body"], v["otlp_read_timeout"], v["otlp_token_env"]
            )
            otlp = OtlpOptions(
                host=host,
                port=port,
                allow_remote=v["otlp_allow_remote"],
                max_body=limits.max_body,
                read_timeout=limits.timeout,
                token=limits.token,
                queue_size=v["otlp_queue"],
            )
        click.get_current_context().meta[_META_KEY] = Telemetry(
            otlp=otlp,
            export_url=v["export_url"],
            export_headers=_headers(v["export_headers"]),
            junit=v["junit"],
        )
        return command(*args, **kwargs)

    decorated: Any = wrapper
    for option in reversed(_OPTIONS):
        decorated = option(decorated)
    return decorated  # type: ignore[no-any-return]


def current_telemetry() -> Telemetry:
    ctx = click.get_current_context(silent=True)
    found = ctx.meta.get(_META_KEY) if ctx is not None else None
    return found if isinstance(found, Telemetry) else Telemetry()


class TeeSink:
    """The run's sink, then the telemetry sinks (JUnit, OTLP export)."""

    def __init__(self, first: Sink, more: list[Any]) -> None:
        self.first = first
        self.more = more

    @property
    def collectors(self) -> list[Any]:
        """Prometheus collectors of the sinks that have counters."""
        return [s for s in self.more if hasattr(s, "collect")]

    def send(self, verdicts: Sequence[Verdict]) -> None:
        self.first.send(verdicts)
        for s in self.more:
            s.send(verdicts)

    def send_decisions(self, decisions: Sequence[GuardDecision]) -> None:
        """Guard decisions (the engine's ``decisions``) to the sinks that take them."""
        for s in self.more:
            if hasattr(s, "send_decisions"):
                s.send_decisions(decisions)

    def flush(self) -> None:
        self.first.flush()
        for s in self.more:
            s.flush()

    def close(self) -> None:
        # Every sink is closed even when one fails (a JUnit report that
        # cannot be written must not cost the exporter its last deliveries);
        # the first failure is raised after.
        failed: Exception | None = None
        for s in (self.first, *self.more):
            try:
                s.close()
            except Exception as exc:  # re-raised below
                failed = failed or exc
        if failed is not None:
            raise failed


def wire(
    tel: Telemetry,
    options: RunOptions,
    sink: Sink,
    *,
    given: Sequence[str],
    log: Any,
    live_idle: float,
) -> Sink:
    """Apply the telemetry options to a run: the receiver and the extra sinks."""
    if tel.otlp is not None:
        from trajgrade.kafka.options import current_kafka_options

        if current_kafka_options() is not None:
            msg = "--otlp and --kafka-bootstrap are two sources for one run; run one trajgrade for each"
            raise click.UsageError(msg)
        if tel.otlp.allow_remote and tel.otlp.token is None:
            log.warning(
                "otlp_without_token",
                host=tel.otlp.host,
                reason="--otlp-allow-remote without --otlp-token-env: anyone who reaches the port can feed the grader",
            )
        options.otlp = tel.otlp
        if not given:
            options.inputs = []  # received, not read from stdin
        if options.idle_timeout is None:
            options.idle_timeout = live_idle
    more: list[Any] = []
    if tel.junit is not None:
        from trajgrade.errors import SinkError
        from trajgrade.telemetry.junit import JunitSink, check_writable

        try:
            check_writable(tel.junit)
        except SinkError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_USAGE)
        more.append(JunitSink(tel.junit))
    if tel.export_url is not None:
        from trajgrade.telemetry.export import EvaluationExporter

        try:
            more.append(
                EvaluationExporter(tel.export_url, headers=tel.export_headers, log=log)
            )
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
    return TeeSink(sink, more) if more else sink
