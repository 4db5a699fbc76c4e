"""deploy/k8s/quix-grader.yaml read as an operator would (it cannot run here):
its environment is the example application's options, its state volume is
where the application keeps its state, and applying it cannot overwrite a
real secret."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from trajgrade.integrations import quix_app

DEPLOY = Path(__file__).parents[2] / "deploy"


def _docs() -> dict[str, dict]:  # type: ignore[type-arg]
    text = (DEPLOY / "k8s" / "quix-grader.yaml").read_text()
    return {d["kind"]: d for d in yaml.safe_load_all(text) if d}


def test_the_statefulset_runs_the_application_with_its_own_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    docs = _docs()
    assert "Secret" not in docs
    sts = docs["StatefulSet"]
    pod = sts["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["command"] == ["python", "-m", quix_app.__name__]
    env = {e["name"]: e["value"] for e in container["env"]}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    options = quix_app._options([])
    # Every variable is an option the application reads, with its value.
    for name, value in env.items():
        parsed = getattr(options, name.removeprefix("TRAJGRADE_QUIX_").lower())
        assert parsed == type(parsed)(value), name
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["state"] == options.state_dir
    assert [t["metadata"]["name"] for t in sts["spec"]["volumeClaimTemplates"]] == [
        "state"
    ]
    assert options.policy.startswith(mounts["policy"])
    assert options.kafka_config.startswith(mounts["kafka-secret"])
    assert sts["spec"]["serviceName"] == docs["Service"]["metadata"]["name"]
    assert pod["automountServiceAccountToken"] is False
    # SIGTERM ends with a checkpoint: the grace period outlasts a commit
    # interval and the librdkafka flush of its changelog writes.
    assert pod["terminationGracePeriodSeconds"] > 60 + options.commit_interval
