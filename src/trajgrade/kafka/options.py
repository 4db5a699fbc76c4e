"""Kafka options: one msgspec Struct, the checks a run needs it to pass, and
the client settings (security) built from it.

The command-line options that fill it are :mod:`trajgrade.cli.kafka_options`;
a refused combination is a :class:`KafkaOptionsError`, which the CLI reports
as a usage error.

Secrets: the SASL password is read from an environment variable or a file
when the clients are built (:func:`client_settings`); it is never a field of
:class:`KafkaOptions`, so logging or printing the options cannot leak it.
"""

from __future__ import annotations

import os
import re
from typing import Any, Final

import msgspec

from trajgrade.errors import SourceError

__all__ = (
    "PASSWORD_ENV",
    "KafkaOptions",
    "KafkaOptionsError",
    "check_kafka_options",
    "client_settings",
    "group_settings",
)

#: Loopback unless told otherwise (the same default as trajgrade.runtime.metrics,
#: kept here so that building the CLI does not import prometheus-client).
DEFAULT_METRICS_HOST: Final = "127.0.0.1"
#: Environment variable holding the SASL password (the file option wins).
PASSWORD_ENV: Final = "TRAJGRADE_KAFKA_SASL_PASSWORD"
#: Kafka's rule for topic names (checked by every broker).
_TOPIC_NAME: Final = re.compile(r"[a-zA-Z0-9._-]{1,249}")


class KafkaOptionsError(ValueError):
    """Kafka options a run cannot work with; the message names the options
    and the fix (the CLI reports it as a usage error, exit status 2)."""


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


def check_kafka_options(opts: KafkaOptions) -> None:
    """Refuse options a run cannot work with, before any client starts:
    :class:`KafkaOptionsError` saying which and what to do."""
    if opts.repartition and opts.encoding != "lines":
        msg = "--repartition re-keys event lines by trace id; OTLP payloads (--kafka-encoding otlp_*) must be keyed by session upstream (see deploy/otel/collector-kafka.yaml)"
        raise KafkaOptionsError(msg)
    if opts.security_protocol.startswith("SASL_") and not opts.sasl_username:
        msg = f"--kafka-security-protocol {opts.security_protocol} needs --kafka-sasl-username (and the password in ${PASSWORD_ENV} or --kafka-sasl-password-file)"
        raise KafkaOptionsError(msg)
    _check_topic_names(opts)


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
        raise KafkaOptionsError(msg)
    inputs = (opts.topic, opts.changelog_topic, opts.repartition_topic)
    if opts.verdicts_topic in inputs:
        # Verdicts written where events (or state) are read: each would come
        # back as a rejected record, or corrupt the state.
        msg = f"--verdicts-topic {opts.verdicts_topic!r} is a topic this run reads; write verdicts to a topic of their own"
        raise KafkaOptionsError(msg)
