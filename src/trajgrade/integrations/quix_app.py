"""A ready-to-run Quix Streams application that grades a topic of agent events.

::

    python -m trajgrade.integrations.quix_app --broker kafka:9092 \\
        --input agent-events --output agent-verdicts --policy policy.yaml \\
        --group trajgrade-quix --state-dir /var/lib/trajgrade-quix --idle 1800

Records of ``--input`` are events keyed by trace id (``--group-by`` when
producers key otherwise), one line of any supported format each; verdicts
and guard decisions go to ``--output`` as the JSON lines ``trajgrade grade``
prints, keyed by trace id (headers ``trajgrade-id``, ``trajgrade-kind``).
State lives in ``--state-dir`` (RocksDB) and in Quix's changelog topics; a
restart or a new replica recovers it from them. Every option can come from
the environment (``TRAJGRADE_QUIX_<OPTION>``, e.g. ``TRAJGRADE_QUIX_BROKER``).
It stops cleanly on SIGTERM (Quix's own handler).
"""

from __future__ import annotations

import argparse
import json
import os
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from trajgrade.integrations.quixstreams import QuixGrader, grade

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ("build", "main")

_ENV = "TRAJGRADE_QUIX_"
#: Kafka's defaults, for brokers whose DescribeConfigs answers without them
#: (tansu): Quix derives its changelog topics' retention from the input's.
_RETENTION = {"retention.ms": "604800000", "retention.bytes": "-1"}


def _options(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m trajgrade.integrations.quix_app",
        description=__doc__.split("\n")[0],
    )

    def opt(name: str, **kw: Any) -> None:
        env = _ENV + name.upper().replace("-", "_")
        default = os.environ.get(env, kw.pop("default", None))
        p.add_argument(
            f"--{name}", default=default, help=f"{kw.pop('help')} (env {env})", **kw
        )

    opt(
        "broker",
        required="TRAJGRADE_QUIX_BROKER" not in os.environ,
        help="bootstrap servers",
    )
    opt("input", default="agent-events", help="topic of events")
    opt("output", default="agent-verdicts", help="topic of verdicts and decisions")
    opt("policy", default="policy.yaml", help="policy file")
    opt("group", default="trajgrade-quix", help="consumer group")
    opt("state-dir", default="state", help="RocksDB state directory")
    opt(
        "format",
        default="auto",
        help="input format (auto: per trace, from its first record)",
    )
    opt(
        "idle",
        type=float,
        default=1800.0,
        help="end traces idle this many seconds of event time (0: never)",
    )
    opt(
        "guarantee",
        default="at-least-once",
        choices=("at-least-once", "exactly-once"),
        help="processing guarantee",
    )
    opt("commit-interval", type=float, default=5.0, help="seconds between checkpoints")
    opt("session-timeout-ms", type=int, default=45000, help="consumer session timeout")
    opt(
        "kafka-config",
        default=None,
        help="JSON file of librdkafka settings (TLS, SASL)",
    )
    p.add_argument(
        "--allow-code", action="store_true", help="let the policy run code it names"
    )
    p.add_argument(
        "--group-by", action="store_true", help="repartition by the records' trace_id"
    )
    p.add_argument("--stop-after", type=float, default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def build(options: argparse.Namespace) -> Any:
    """The Application, its pipeline wired (``app.run()`` runs it)."""
    from quixstreams import Application
    from quixstreams.kafka.configuration import ConnectionConfig

    settings = {"bootstrap.servers": options.broker}
    if options.kafka_config:  # (a mounted Secret: the SASL password stays out of argv)
        with open(options.kafka_config, encoding="utf-8") as f:
            settings = {**json.load(f), **settings}
    app = Application(
        broker_address=ConnectionConfig.from_librdkafka_dict(settings),
        consumer_group=options.group,
        state_dir=options.state_dir,
        auto_offset_reset="earliest",
        commit_interval=options.commit_interval,
        processing_guarantee=options.guarantee,
        consumer_extra_config={"session.timeout.ms": options.session_timeout_ms},
    )
    events = app.topic(
        options.input, key_deserializer="str", value_deserializer="bytes"
    )
    verdicts = app.topic(options.output, key_serializer="str", value_serializer="bytes")
    for topic in (events, verdicts):
        for key, value in _RETENTION.items():
            topic.broker_config.extra_config.setdefault(key, value)
    grader = QuixGrader.from_policy(
        options.policy, format=options.format, allow_code=options.allow_code
    )
    idle = timedelta(seconds=options.idle) if options.idle > 0 else None
    sdf = grade(app.dataframe(events), grader, idle=idle, group_by=options.group_by)
    sdf.to_topic(verdicts)
    return app


def main(argv: Sequence[str] | None = None) -> None:
    options = _options(argv)
    app = build(options)
    if options.stop_after is not None:  # (tests and benchmarks: a bounded run)
        import threading

        threading.Timer(options.stop_after, app.stop).start()
    app.run()


if __name__ == "__main__":
    main()
