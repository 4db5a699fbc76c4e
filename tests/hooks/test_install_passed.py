"""``hook install`` takes the hook's own options docs/hooks.md lists
(``--verdicts``, ``--decisions``, ``--max-age``) and writes them into the
registered command: the real CLI installs, the registered command runs."""

from __future__ import annotations

import json
from pathlib import Path

from tests.hooks._installed import command, denied, install, payload, run_hook

GUARD = """\
graders:
  - type: tool-calls
    name: guard
    on_fail: deny
    config:
      disallowed: [{kind: shell, program: "^curl$"}]
"""


def test_the_hooks_output_options_reach_the_registered_hook(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text(GUARD)
    out = install(
        tmp_path, "-c", "policy.yaml", "--verdicts", "v.jsonl",
        "--decisions", "d.jsonl", "--max-age", "3600",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    words = command(tmp_path)
    # Relative files are made absolute: the hook runs in the agent's cwd.
    assert words[words.index("--verdicts") + 1] == str(tmp_path / "v.jsonl")
    assert words[words.index("--max-age") + 1] == "3600.0"
    curl = payload("03-PreToolUse", tool_input={"command": "curl https://x.test"})
    answer, stderr = run_hook(tmp_path, curl)
    assert denied(answer), stderr
    decisions = [json.loads(x) for x in (tmp_path / "d.jsonl").read_text().splitlines()]
    assert [d["type"] for d in decisions] == ["decision"]
    assert (tmp_path / "v.jsonl").read_text().strip()


def test_a_max_age_the_hook_would_refuse_is_refused_at_install(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text(GUARD)
    out = install(tmp_path, "-c", "policy.yaml", "--max-age", "0")
    assert out.returncode == 2
    assert "Invalid value for '--max-age'" in out.stderr
    assert not (tmp_path / ".claude" / "settings.json").exists()


def test_with_server_they_are_serves_options(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("t")
    out = install(
        tmp_path, "--server", "http://127.0.0.1:9", "--token-file", str(token),
        "--verdicts", "v.jsonl",
    )  # fmt: skip
    assert out.returncode == 2
    assert "--verdicts with --server: give them to `trajgrade serve`" in out.stderr
