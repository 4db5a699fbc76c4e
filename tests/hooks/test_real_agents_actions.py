"""``on_fail: ask`` and ``warn`` with the real Claude Code, Codex and Gemini
CLIs (the same npm installs, fake models and scripts as the other real-agent
tests): what each host really does with them, recorded in docs/guard.md.

The scripted session writes note.txt in its third call; the policy names
that write.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.hooks.test_real_agents import _claude, _hook, _run_claude
from tests.hooks.test_real_agents import fake_model_fixture as fake_model_fixture
from tests.hooks.test_real_agents_codex import BLOCKED
from tests.hooks.test_real_agents_codex import codex_run_fixture as codex_run_fixture
from tests.hooks.test_real_agents_gemini import (
    gemini_run_fixture as gemini_run_fixture,
)

NOTE = {
    "claude-code": '{name: "^Write$", args: {file_path: "note\\\\.txt$"}}',
    "codex": '{name: "^apply_patch$"}',
    "gemini": '{name: "^write_file$", args: {file_path: "note\\\\.txt$"}}',
}


def _policy(agent: str, mark: str) -> str:
    return (
        f"graders:\n  - type: tool-calls\n    name: no-notes\n    on_fail: {mark}\n"
        f"    config:\n      disallowed:\n        - {NOTE[agent]}\n"
    )


def test_claude_code_warn_lets_the_call_run(
    fake_model: tuple[int, Path, Path], tmp_path: Path
) -> None:
    """warn is shadow mode: the write happens, the run ends normally, and the
    decision is in the stream the hook writes."""
    port, work, _ = fake_model
    policy = tmp_path / "p.yaml"
    policy.write_text(_policy("claude-code", "warn"))
    hook = _hook(policy, tmp_path / "state", tmp_path / "v.jsonl")
    hook += f" --decisions {tmp_path / 'd.jsonl'}"
    out = _run_claude(_claude(), port, work, tmp_path / "home", hook)
    assert (work / "note.txt").exists()
    assert out[-1]["result"] == "done"
    decisions = [json.loads(x) for x in (tmp_path / "d.jsonl").read_text().splitlines()]
    assert [(d["action"], d["tool"]) for d in decisions] == [("warn", "Write")]


def test_claude_code_ask_in_a_headless_run_is_not_run(
    fake_model: tuple[int, Path, Path], tmp_path: Path
) -> None:
    """ask: Claude Code asks; in ``-p`` mode nobody answers, so the write
    does not happen and the session goes on."""
    port, work, _ = fake_model
    policy = tmp_path / "p.yaml"
    policy.write_text(_policy("claude-code", "ask"))
    hook = _hook(policy, tmp_path / "state", tmp_path / "v.jsonl")
    out = _run_claude(_claude(), port, work, tmp_path / "home", hook)
    assert not (work / "note.txt").exists()
    assert out[-1]["result"] == "done"


def test_codex_ask_is_sent_as_a_deny(codex_run: tuple[Any, Path]) -> None:
    """Codex ignores permissionDecision "ask" (the patch would run), so the
    hook denies: no note.txt, the model is told, Codex goes on."""
    run, work = codex_run
    out = run(_policy("codex", "ask"))
    assert not (work / "note.txt").exists()
    patch_out = out.outputs()[2]
    assert patch_out.startswith(BLOCKED + "trajgrade denied this call: ")
    assert out.last_message() == "done"


def test_gemini_ask_is_sent_as_a_deny(gemini_run: tuple[Any, Path]) -> None:
    """Gemini's own ask would hang a headless run, so the hook denies."""
    run, work = gemini_run
    out = run(_policy("gemini", "ask"))
    assert not (work / "note.txt").exists()
    assert ("write_file", "error", "policy_violation") in out.tools()
    assert out.text().endswith("done")


def test_gemini_warn_lets_the_call_run(gemini_run: tuple[Any, Path]) -> None:
    run, work = gemini_run
    out = run(_policy("gemini", "warn"))
    assert (work / "note.txt").exists()
    assert ("write_file", "success", None) in out.tools()
    assert out.text().endswith("done")
