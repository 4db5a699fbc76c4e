"""docs/agents.md is generated from the matcher's own tables and kept fresh."""

from __future__ import annotations

from pathlib import Path

from trajgrade.graders.matching._agents import AGENTS, KINDS
from trajgrade.graders.matching.reference import render

DOC = Path(__file__).resolve().parents[2] / "docs" / "agents.md"


def test_the_reference_is_not_stale() -> None:
    assert DOC.read_text(encoding="utf-8") == render(), (
        "docs/agents.md is stale: run "
        "`python -m trajgrade.graders.matching.reference > docs/agents.md`"
    )


def test_the_reference_lists_every_tool_kind_and_agent() -> None:
    text = render()
    for kind in KINDS:
        assert f"| `{kind}` |" in text
    sections = {
        part.split("`--agent ", 1)[1].split("`", 1)[0]: part
        for part in text.split("\n## ")
        if "`--agent " in part
    }
    assert set(sections) == set(AGENTS)
    for agent, tools in AGENTS.items():
        rows = sections[agent].splitlines()
        for name, tool in tools.items():
            row = next(line for line in rows if line.startswith(f"| `{name}` |"))
            assert f"`{tool.kind}`" in row
            for spec in tool.path + tool.command + tool.url:
                assert f"`{spec}`" in row, (agent, name, spec)
