"""Usage events name the model that produced them, on each adapter's real
recorded log (cost-budget prices tokens by it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.formats._decode import decode, raw
from tests.hooks._replay import FIXTURES as HOOK_FIXTURES
from tests.hooks._replay import RECORDED

from trajgrade.events import Usage
from trajgrade.hooks.usage import Cursor, read_usage

FIXTURES = Path(__file__).parent.parent / "fixtures"

#: (fixture, format detected, the models its usage events must name)
CASES = [
    (
        "claude-code/codemie_v2.0.64_small.jsonl",
        "claude-code",
        {"claude-sonnet-4-5-20250929"},
    ),
    ("codex/live_v0.169.0_rollout.jsonl", "codex", {"gpt-5.5"}),
    ("gemini-cli/agentcmd_gemini_3_calls.json", "gemini-cli", {"gemini-2.5-pro"}),
    ("gemini-cli-live/base.transcript.jsonl", "gemini-cli-jsonl", {"gemini-3.8-flash"}),
    ("gemini-cli-live/base.stream.jsonl", "gemini-stream-json", {"gemini-fake"}),
    ("atif/atif2otel_claude-code_v1.7_pass.json", "atif", {"claude-opus-4-6"}),
    ("otel/agent_run.jsonl", "otel", {"gpt-4o"}),
    (
        "openhands/openhands_wrong_initial_state.json",
        "openhands",
        {"claude-3-5-sonnet-20241022"},
    ),
]


@pytest.mark.parametrize(("name", "fmt", "models"), CASES, ids=[c[1] for c in CASES])
def test_usage_names_its_model(name: str, fmt: str, models: set[str]) -> None:
    path = FIXTURES / name
    events, _ = decode(raw(path), fmt=fmt, source=path.name)
    usage = [e for e in events if isinstance(e, Usage)]
    assert usage, f"{name} has usage events"
    assert {u.model for u in usage if u.input_tokens or u.output_tokens} == models


@pytest.mark.parametrize(
    ("agent", "model"),
    [
        ("claude-code", "claude-opus-4-8"),
        ("codex", "gpt-5.5"),
        ("gemini", "gemini-3.8-flash"),
    ],
)
def test_hook_usage_names_its_model(agent: str, model: str, tmp_path: Path) -> None:
    """The hook path reads usage from the transcript; Codex names its model in
    turn_context lines, apart from its token counts."""
    folder, name = RECORDED[agent]
    path = tmp_path / "t.jsonl"
    path.write_bytes((HOOK_FIXTURES / folder / name).read_bytes())
    usage = read_usage(agent, str(path), Cursor())
    assert usage
    assert {u.model for u in usage} == {model}
