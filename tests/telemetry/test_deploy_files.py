"""deploy/: the Grafana dashboard and alert rules query series trajgrade
really exports; the Collector configs are complete pipelines whose trajgrade
side matches trajgrade's options."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from click.testing import CliRunner

from trajgrade.cli.main import main
from trajgrade.runtime.metrics import Metrics
from trajgrade.telemetry.export import EvaluationExporter

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
_SERIES = re.compile(r"\btrajgrade_[a-z_]+\b")


def _exported_series() -> set[str]:
    metrics = Metrics()
    exporter = EvaluationExporter("http://127.0.0.1:9", close_timeout=0.1)
    try:
        metrics.registry.register(exporter)
        metrics.verdicts.labels("pass").inc()
        metrics.records.labels("t").inc()
        metrics.consumer_lag.labels("t", "0").set(1)
        text = metrics.exposition().decode()
    finally:
        exporter.close()
    return {
        line.split("{")[0].split()[0]
        for line in text.splitlines()
        if line.startswith("trajgrade_")
    }


def test_dashboard_queries_exported_series() -> None:
    dash = json.loads((DEPLOY / "grafana" / "trajgrade-dashboard.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    used = {m for e in exprs for m in _SERIES.findall(e)}
    assert used
    assert used <= _exported_series(), used - _exported_series()
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))


def test_alert_rules_query_exported_series() -> None:
    rules = yaml.safe_load(
        (DEPLOY / "prometheus" / "trajgrade-alerts.yaml").read_text()
    )
    [group] = rules["groups"]
    exported = _exported_series()
    for rule in group["rules"]:
        assert {"alert", "expr", "labels", "annotations"} <= set(rule)
        used = set(_SERIES.findall(rule["expr"]))
        assert used
        assert used <= exported, (rule["alert"], used - exported)


def _pipelines_complete(cfg: dict) -> None:
    for name, pipe in cfg["service"]["pipelines"].items():
        for kind in ("receivers", "processors", "exporters"):
            for comp in pipe.get(kind, []):
                assert comp in cfg[kind], f"{name}: {kind} {comp} is not defined"


def test_direct_collector_config_targets_the_receiver() -> None:
    cfg = yaml.safe_load((DEPLOY / "otel" / "collector-direct.yaml").read_text())
    _pipelines_complete(cfg)
    exporter = cfg["exporters"]["otlphttp/trajgrade"]
    assert exporter["endpoint"].startswith("http://127.0.0.1:")
    assert exporter["compression"] == "gzip"  # the receiver gunzips (bounded)
    assert set(cfg["service"]["pipelines"]) == {"logs", "traces"}


def test_kafka_collector_config_matches_the_consumer_options() -> None:
    cfg = yaml.safe_load((DEPLOY / "otel" / "collector-kafka.yaml").read_text())
    _pipelines_complete(cfg)
    kafka = cfg["exporters"]["kafka"]
    encoding = kafka["logs"]["encoding"]
    help_text = CliRunner().invoke(main, ["grade", "--help"]).output
    assert "--kafka-encoding" in help_text
    assert encoding in ("otlp_proto", "otlp_json")
    assert encoding in help_text
    assert kafka["partition_logs_by_resource_attributes"] is True
    keys = cfg["processors"]["groupbyattrs/session"]["keys"]
    assert {"session.id", "conversation.id"} <= set(keys)


def test_session_lifted_to_the_resource_still_names_the_trace() -> None:
    """What groupbyattrs does to a Claude Code record: session.id moves to the resource."""
    from tests.telemetry._otlp import events_of

    body = {
        "resourceLogs": [
            {
                "resource": {
                    "attributes": [
                        {"key": "session.id", "value": {"stringValue": "s-9"}}
                    ]
                },
                "scopeLogs": [
                    {
                        "logRecords": [
                            {
                                "timeUnixNano": "1700000000000000000",
                                "body": {"stringValue": "claude_code.user_prompt"},
                            }
                        ]
                    }
                ],
            }
        ]
    }
    events, errors = events_of([json.dumps(body).encode()])
    assert not errors
    assert [e.trace_id for e in events] == ["s-9"]
