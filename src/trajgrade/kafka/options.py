"""Kafka options: one msgspec Struct, the click options that fill it, and the
client settings (security) built from it.

The CLI adds these options to ``trajgrade grade`` with one decorator
(:func:`kafka_options`); the wrapped command never sees them as arguments:
they are gathered into a :class:`KafkaOptions` in ``click``'s context
(:func:`current_kafka_options`), so ``grade`` keeps its signature and only
asks "was Kafka requested?".

Secrets: the SASL password is read from an environment variable or a file
when the clients are built (:func:`client_settings`); it is never a field of
:class:`KafkaOptions`, so logging or printing the options cannot leak it.
"""

from __future__ import annotations

import functools
import os
import re
from typing import TYPE_CHECKING, Any, Final, TypeVar

import click
import msgspec

from trajgrade.cli.types import FiniteFloat, require_companions
from trajgrade.errors import SourceError

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = (
    "PASSWORD_ENV",
    "KafkaOptions",
    "client_settings",
    "current_kafka_options",
    "kafka_options",
)

#: Loopback unless told otherwise (the same default as trajgrade.runtime.metrics,
#: kept here so that building the CLI does not import prometheus-client).
DEFAULT_METRICS_HOST: Final = "127.0.0.1"
#: Environment variable holding the SASL password (the file option wins).
PASSWORD_ENV: Final = "TRAJGRADE_KAFKA_SASL_PASSWORD"
#: Kafka's rule for topic names (checked by every broker).
_TOPIC_NAME: Final = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_META_KEY: Final = "trajgrade.kafka"
_METRICS_KEY: Final = "trajgrade.runtime.metrics"

F = TypeVar("F", bound="Callable[..., Any]")


class KafkaOptions(msgspec.Struct, kw_only=True, frozen=True):
    """Where to read, where to write, how to keep state (see ``--help``)."""

    bootstrap: str
    topic: str
    group: str = "trajgrade"
    verdicts_topic: str | None = None
    repartition: bool = False
    #: ``lines`` (one event line per record), or the Collector's Kafka
    #: exporter encodings ``otlp_proto`` / ``otlp_json``.
    encoding: str = "lines"
    #: The OTLP signal of ``otlp_*`` records: ``logs`` or ``traces``.
    otlp_signal: str = "logs"
    max_open_traces: int = 100_000
    metrics_port: int | None = None
    metrics_host: str = DEFAULT_METRICS_HOST
    session_timeout: float = 10.0
    client_id: str = "trajgrade"
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password_file: str | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None

    @property
    def otlp(self) -> tuple[str, str] | None:
        """The records' OTLP message (as its HTTP path) and content type;
        None for lines."""
        if self.encoding == "lines":
            return None
        ctype = (
            "application/json"
            if self.encoding == "otlp_json"
            else "application/x-protobuf"
        )
        return f"/v1/{self.otlp_signal}", ctype

    @property
    def changelog_topic(self) -> str:
        """The compacted topic holding per-trace state (Kafka Streams' naming)."""
        return f"{self.group}-{self.topic}-changelog"

    @property
    def repartition_topic(self) -> str:
        """The internal topic records are re-keyed into by ``--repartition``."""
        return f"{self.group}-{self.topic}-repartition"


def client_settings(opts: KafkaOptions) -> dict[str, Any]:
    """Connection and security keyword arguments shared by every aiokafka client."""
    settings: dict[str, Any] = {
        "bootstrap_servers": opts.bootstrap,
        "client_id": opts.client_id,
        "security_protocol": opts.security_protocol,
    }
    if opts.security_protocol in ("SSL", "SASL_SSL"):
        from aiokafka.helpers import create_ssl_context

        settings["ssl_context"] = create_ssl_context(
            cafile=opts.ssl_cafile,
            certfile=opts.ssl_certfile,
            keyfile=opts.ssl_keyfile,
        )
    if opts.security_protocol.startswith("SASL_"):
        settings["sasl_mechanism"] = opts.sasl_mechanism or "PLAIN"
        settings["sasl_plain_username"] = opts.sasl_username
        settings["sasl_plain_password"] = _password(opts)
    return settings


def group_settings(opts: KafkaOptions) -> dict[str, Any]:
    """Keyword arguments of a group consumer (the grader's and the
    repartition stage's): manual commits, from the earliest offset, the
    session and fetch sizes, and :func:`client_settings`."""
    session_ms = int(opts.session_timeout * 1000)
    return {
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "session_timeout_ms": session_ms,
        "heartbeat_interval_ms": max(session_ms // 3, 100),
        "max_partition_fetch_bytes": 8 * 1024 * 1024,
        "fetch_max_bytes": 64 * 1024 * 1024,
        **client_settings(opts),
    }


def _password(opts: KafkaOptions) -> str | None:
    if opts.sasl_password_file is not None:
        try:
            with open(opts.sasl_password_file, encoding="utf-8") as f:
                return f.read().strip()
        except OSError as exc:
            msg = f"cannot read the SASL password file ({exc.strerror}); check --kafka-sasl-password-file"
            raise SourceError(msg) from None
    return os.environ.get(PASSWORD_ENV)


_OPTIONS: Final[list[Callable[[Any], Any]]] = [
    click.option(
        "--kafka-bootstrap",
        metavar="HOST:PORT[,...]",
        default=None,
        help="Grade a Kafka topic instead of files (needs --topic).",
    ),
    click.option("--topic", default=None, help="Kafka topic of agent events."),
    click.option(
        "--group",
        default="trajgrade",
        show_default=True,
        help="Consumer group; processes in one group share the partitions.",
    ),
    click.option(
        "--verdicts-topic",
        default=None,
        help="Write verdicts to this topic (keyed by trace id) instead of stdout.",
    ),
    click.option(
        "--repartition",
        is_flag=True,
        help="Re-key records by trace id through an internal topic first (topics not keyed by trace).",
    ),
    click.option(
        "--kafka-encoding",
        type=click.Choice(["lines", "otlp_proto", "otlp_json"]),
        default="lines",
        show_default=True,
        help="Record values: event lines, or OTLP payloads as the OpenTelemetry Collector's Kafka exporter writes them.",
    ),
    click.option(
        "--kafka-otlp-signal",
        type=click.Choice(["logs", "traces"]),
        default="logs",
        show_default=True,
        help="With otlp_* encodings: the records hold logs (agents' events) or traces (GenAI spans).",
    ),
    click.option(
        "--max-open-traces",
        type=click.IntRange(min=1),
        default=100_000,
        show_default=True,
        help="At the cap, the least recently active trace is closed early.",
    ),
    click.option(
        "--metrics-port",
        type=click.IntRange(min=0, max=65535),
        default=None,
        help="Serve /metrics, /healthz and /readyz on this port.",
    ),
    click.option(
        "--metrics-host",
        default=DEFAULT_METRICS_HOST,
        show_default=True,
        help="Address the metrics server binds to (0.0.0.0 in a container).",
    ),
    click.option(
        "--kafka-session-timeout",
        type=FiniteFloat(min=1),
        default=10.0,
        show_default=True,
        help="Seconds before a silent consumer's partitions move to another.",
    ),
    click.option("--kafka-client-id", default="trajgrade", show_default=True),
    click.option(
        "--kafka-security-protocol",
        type=click.Choice(["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]),
        default="PLAINTEXT",
        show_default=True,
    ),
    click.option(
        "--kafka-sasl-mechanism",
        type=click.Choice(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]),
        default=None,
    ),
    click.option("--kafka-sasl-username", default=None),
    click.option(
        "--kafka-sasl-password-file",
        type=click.Path(dir_okay=False),
        default=None,
        help=f"File holding the SASL password (else ${PASSWORD_ENV}).",
    ),
    click.option("--kafka-ssl-cafile", type=click.Path(dir_okay=False), default=None),
    click.option("--kafka-ssl-certfile", type=click.Path(dir_okay=False), default=None),
    click.option("--kafka-ssl-keyfile", type=click.Path(dir_okay=False), default=None),
]

#: click parameter name -> KafkaOptions field.
_FIELDS: Final = {
    "kafka_bootstrap": "bootstrap",
    "topic": "topic",
    "group": "group",
    "verdicts_topic": "verdicts_topic",
    "repartition": "repartition",
    "kafka_encoding": "encoding",
    "kafka_otlp_signal": "otlp_signal",
    "max_open_traces": "max_open_traces",
    "metrics_port": "metrics_port",
    "metrics_host": "metrics_host",
    "kafka_session_timeout": "session_timeout",
    "kafka_client_id": "client_id",
    "kafka_security_protocol": "security_protocol",
    "kafka_sasl_mechanism": "sasl_mechanism",
    "kafka_sasl_username": "sasl_username",
    "kafka_sasl_password_file": "sasl_password_file",
    "kafka_ssl_cafile": "ssl_cafile",
    "kafka_ssl_certfile": "ssl_certfile",
    "kafka_ssl_keyfile": "ssl_keyfile",
}


#: Parameter names (prefixes) of the options that only Kafka runs read.
_KAFKA_ONLY: Final = ("kafka_", "group", "verdicts_topic", "repartition", "max_open")


def kafka_options(command: F) -> F:
    """Add the Kafka options to a click command; they reach it through
    :func:`current_kafka_options`, not as arguments."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        values = {field: kwargs.pop(name) for name, field in _FIELDS.items()}
        ctx = click.get_current_context()
        ctx.meta[_META_KEY] = _build(values)
        # The metrics endpoint serves file runs too (follow, watch).
        ctx.meta[_METRICS_KEY] = (values["metrics_port"], values["metrics_host"])
        return command(*args, **kwargs)

    decorated: Any = wrapper
    for option in reversed(_OPTIONS):
        decorated = option(decorated)
    return decorated  # type: ignore[no-any-return]


def _build(values: dict[str, Any]) -> KafkaOptions | None:
    bootstrap, topic = values["bootstrap"], values["topic"]
    if bootstrap is None:
        if topic is not None:
            msg = "--topic needs --kafka-bootstrap (the brokers to read it from)"
            raise click.UsageError(msg)
        # Kafka-only options without Kafka would be ignored without a word.
        require_companions(
            {n: "kafka_bootstrap" for n in _FIELDS if n.startswith(_KAFKA_ONLY)}
        )
        return None
    if topic is None:
        msg = "--kafka-bootstrap needs --topic (the topic of agent events to grade)"
        raise click.UsageError(msg)
    if values["repartition"] and values["encoding"] != "lines":
        msg = "--repartition re-keys event lines by trace id; OTLP payloads (--kafka-encoding otlp_*) must be keyed by session upstream (see deploy/otel/collector-kafka.yaml)"
        raise click.UsageError(msg)
    if values["security_protocol"].startswith("SASL_") and not values["sasl_username"]:
        msg = f"--kafka-security-protocol {values['security_protocol']} needs --kafka-sasl-username (and the password in ${PASSWORD_ENV} or --kafka-sasl-password-file)"
        raise click.UsageError(msg)
    opts = KafkaOptions(**values)
    _check_topic_names(opts)
    return opts


def _check_topic_names(opts: KafkaOptions) -> None:
    """Names a broker would refuse, refused here: otherwise the first write
    to such a topic waited 40 s for metadata, then raised."""
    names = [
        ("--topic", opts.topic),
        ("--verdicts-topic", opts.verdicts_topic),
        # The group names the internal topics.
        ("--group", opts.changelog_topic),
        ("--group", opts.repartition_topic),
    ]
    for option, name in names:
        if name is None or (
            _TOPIC_NAME.fullmatch(name) is not None and name not in (".", "..")
        ):
            continue
        what = (
            f"{option} {name!r}"
            if option != "--group"
            else f"--group {opts.group!r} (it names the internal topic {name!r})"
        )
        msg = f"{what} is not a legal Kafka topic name: use at most 249 of a-z, A-Z, 0-9, '.', '_' and '-'"
        raise click.UsageError(msg)
    inputs = (opts.topic, opts.changelog_topic, opts.repartition_topic)
    if opts.verdicts_topic in inputs:
        # Verdicts written where events (or state) are read: each would come
        # back as a rejected record, or corrupt the state.
        msg = f"--verdicts-topic {opts.verdicts_topic!r} is a topic this run reads; write verdicts to a topic of their own"
        raise click.UsageError(msg)


def current_metrics_options() -> tuple[int | None, str]:
    """``--metrics-port`` and ``--metrics-host`` of the running command."""
    ctx = click.get_current_context(silent=True)
    found: tuple[int | None, str] | None = (
        ctx.meta.get(_METRICS_KEY) if ctx is not None else None
    )
    return found if found is not None else (None, DEFAULT_METRICS_HOST)


def current_kafka_options() -> KafkaOptions | None:
    """The Kafka options of the running command; None when not given."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return None
    found: KafkaOptions | None = ctx.meta.get(_META_KEY)
    return found
