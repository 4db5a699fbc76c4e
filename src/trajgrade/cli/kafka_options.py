"""``grade``'s Kafka options on the command line (``--kafka-bootstrap``,
``--topic``, ... and ``--metrics-port``/``--metrics-host``), as one
decorator: the command receives them as ``kafka:``
(:class:`~trajgrade.kafka.options.KafkaOptions`, None without
``--kafka-bootstrap``) and ``metrics:``
(:class:`~trajgrade.cli.grade_request.MetricsOptions`) keyword arguments.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Final, TypeVar

import click

from trajgrade.cli.types import FiniteFloat, require_companions
from trajgrade.kafka.options import (
    DEFAULT_METRICS_HOST,
    PASSWORD_ENV,
    KafkaOptions,
    KafkaOptionsError,
    check_kafka_options,
)

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ("kafka_options",)

F = TypeVar("F", bound="Callable[..., Any]")

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
    """Add the Kafka options to a click command; it receives them as
    ``kafka=`` and ``metrics=`` keyword arguments."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from trajgrade.cli.grade_request import MetricsOptions

        values = {field: kwargs.pop(name) for name, field in _FIELDS.items()}
        kwargs["kafka"] = _build(values)
        # The metrics endpoint serves file runs too (follow, watch).
        kwargs["metrics"] = MetricsOptions(
            port=values["metrics_port"], host=values["metrics_host"]
        )
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
    opts = KafkaOptions(**values)
    try:
        check_kafka_options(opts)
    except KafkaOptionsError as exc:
        raise click.UsageError(str(exc)) from None
    return opts
