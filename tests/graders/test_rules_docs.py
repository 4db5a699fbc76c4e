"""docs/rules.md: every config block compiles and runs on a real session,
and the flow examples stop the calls its table names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.graders._guard import drive, recorded

from trajgrade import compile_suite, decode_config
from trajgrade.engine.engine import Engine

DOC = Path(__file__).resolve().parents[2] / "docs" / "rules.md"
_BLOCK = re.compile(r"(<!-- illustrative -->\n)?```yaml\n(.*?)```", re.DOTALL)


def _blocks() -> list[str]:
    return [m.group(2) for m in _BLOCK.finditer(DOC.read_text()) if not m.group(1)]


def test_the_page_has_a_config_for_every_rule() -> None:
    kinds = {
        g.kind for text in _blocks() for g in compile_suite(decode_config(text)).graders
    }
    assert kinds == {"cost-budget", "rate-limit", "loop", "flow"}


@pytest.mark.parametrize("text", _blocks())
def test_every_config_block_runs_on_a_real_session(text: str) -> None:
    suite = compile_suite(decode_config(text))
    engine = Engine(suite)
    verdicts = engine.feed_all(recorded("claude-code/spotter_v2.1.38_tool_heavy.jsonl"))
    verdicts += engine.finish()
    assert {v.grader for v in verdicts if v.final} == {g.name for g in suite.graders}


@pytest.mark.parametrize(
    ("name", "session", "call_id"),
    [
        (
            "no-search-result-in-url",
            "claude-code/spotter_v2.1.38_tool_heavy.jsonl",
            "toolu_017Q5Sr8KaSgowYhbKXBnfV2",
        ),
        (
            "read-before-edit",
            "claude-code/spotter_v2.1.39_long_session.jsonl.gz",
            "toolu_016t1M6Q8LfbeZgTs2hUbypA",
        ),
    ],
)
def test_the_flow_examples_stop_the_calls_the_table_names(
    name: str, session: str, call_id: str
) -> None:
    (g,) = (
        g
        for text in _blocks()
        for g in compile_suite(decode_config(text)).graders
        if g.name == name
    )
    run = drive(g, recorded(session))
    assert run.judged[0][1].call_id == call_id
    assert call_id in DOC.read_text()
