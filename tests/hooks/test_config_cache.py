"""The hook's policy cache: same suite, no YAML parsing on later invocations."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trajgrade.errors import ConfigError
from trajgrade.graders import BuildContext
from trajgrade.hooks.config_cache import load_suite_cached

POLICY = """\
graders:
  - type: tool-calls
    config:
      disallowed: [{name: "^Bash$", command: "rm -rf"}]
  - type: tool-call-count
    config: {max: 3}
"""
HOOKS = Path(__file__).parents[1] / "fixtures" / "hooks" / "claude-code" / "hooks"


def test_second_load_comes_from_the_cache_and_a_change_is_seen(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(POLICY)
    state = tmp_path / "state"
    first = load_suite_cached(str(policy), str(state), BuildContext())
    cached = list((state / "config-cache").iterdir())
    assert len(cached) == 1
    again = load_suite_cached(str(policy), str(state), BuildContext())
    assert again.fingerprint == first.fingerprint
    assert [g.name for g in again.graders] == [g.name for g in first.graders]
    policy.write_text(POLICY.replace("max: 3", "max: 4"))
    os.utime(policy, ns=(1, 1))  # a new mtime even within the clock's resolution
    changed = load_suite_cached(str(policy), str(state), BuildContext())
    assert changed.fingerprint != first.fingerprint


def test_a_broken_policy_is_never_cached(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("graders:\n  - type: tool-calls\n    config: {disallowed: 3}\n")
    for _ in range(2):
        with pytest.raises(ConfigError, match=r"p\.yaml:3"):
            load_suite_cached(str(policy), str(tmp_path / "s"), BuildContext())
    assert not (tmp_path / "s" / "config-cache").exists()


def test_a_damaged_cache_file_is_ignored(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(POLICY)
    state = tmp_path / "state"
    load_suite_cached(str(policy), str(state), BuildContext())
    (cache,) = (state / "config-cache").iterdir()
    cache.write_bytes(b"\x00garbage")
    suite = load_suite_cached(str(policy), str(state), BuildContext())
    assert len(suite.graders) == 2


@pytest.mark.slow
def test_a_warm_hook_invocation_does_not_import_yaml(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(POLICY)
    payload = (HOOKS / "03-PreToolUse.json").read_bytes()
    argv = [sys.executable, "-X", "importtime", "-m", "trajgrade", "hook"]
    argv += ["claude-code", "-c", str(policy), "--state-dir", str(tmp_path / "s")]
    imported = []
    for _ in range(2):
        p = subprocess.run(argv, input=payload, capture_output=True, check=True)
        imported.append(
            {
                line.split("|")[-1].strip()
                for line in p.stderr.decode().splitlines()
                if line.startswith("import time:")
            }
        )
    assert "yaml" in imported[0]
    assert "yaml" not in imported[1]
