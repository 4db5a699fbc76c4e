"""The Kafka deploy files, read as an operator would (they cannot run here):
their options exist, their grace periods outlast the consumer's shutdown,
and applying them cannot overwrite a real secret."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from click.testing import CliRunner

from trajgrade.cli.main import main
from trajgrade.kafka.assignment import ADMIN_TIMEOUT
from trajgrade.kafka.sink import CLOSE_TIMEOUT, REQUEST_TIMEOUT

DEPLOY = Path(__file__).parents[2] / "deploy"
#: SIGTERM's worst case against a slow broker: the batch's flush, its
#: commit, then leaving the group and closing the clients.
SHUTDOWN = REQUEST_TIMEOUT + ADMIN_TIMEOUT + CLOSE_TIMEOUT


def _k8s() -> list[dict]:  # type: ignore[type-arg]
    text = (DEPLOY / "k8s" / "kafka-grader.yaml").read_text()
    return [d for d in yaml.safe_load_all(text) if d]


def _grade_help() -> str:
    return CliRunner().invoke(main, ["grade", "--help"]).output


def test_the_deployment_uses_existing_options_and_outlasts_the_shutdown() -> None:
    [dep] = [d for d in _k8s() if d["kind"] == "Deployment"]
    pod = dep["spec"]["template"]["spec"]
    [container] = pod["containers"]
    help_text = _grade_help()
    for arg in container["args"][1:]:
        option = arg.split("=", 1)[0]
        assert option in help_text, option
    assert pod["terminationGracePeriodSeconds"] > SHUTDOWN
    assert pod["automountServiceAccountToken"] is False
    # A placeholder Secret in the file would replace the real one on apply.
    assert not [d for d in _k8s() if d["kind"] == "Secret"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["kafka-secret"]["secret"]["secretName"] == "trajgrade-kafka"


def test_the_systemd_unit_outlasts_the_shutdown_and_keeps_restarting() -> None:
    unit = (DEPLOY / "systemd" / "trajgrade-kafka@.service").read_text()
    stop = re.search(r"^TimeoutStopSec=(\d+)$", unit, re.MULTILINE)
    assert stop is not None
    assert int(stop.group(1)) > SHUTDOWN
    # The default start limit would leave the unit failed after a few
    # start-ups that end with status 2 (a broker unreachable for a while).
    assert re.search(r"^StartLimitIntervalSec=0$", unit, re.MULTILINE)
    assert "Restart=always" in unit
    help_text = _grade_help()
    for option in re.findall(r"(--[a-z-]+)", unit.split("ExecStart=", 1)[1]):
        assert option in help_text, option
