"""Recorded hook payloads become the events the transcript adapters give."""

from __future__ import annotations

import pytest
from tests.hooks._replay import payloads

from trajgrade.events import (
    Message,
    ToolCall,
    ToolResult,
    TraceEnd,
    TraceStart,
    TurnStart,
)
from trajgrade.hooks.payloads import OpenCall, translate


def _all(agent: str) -> list[object]:
    open_calls: list[OpenCall] = []
    n = 0
    events: list[object] = []
    for p in payloads(agent):
        tr, n = translate(agent, p, now=1.0, open_calls=open_calls, next_call=n)
        events.extend(tr.events)
    return events


def test_claude_code_session_events() -> None:
    """A Claude Code session gives start, turn, calls with results, and end."""
    events = _all("claude-code")
    kinds = [type(e).__name__ for e in events]
    assert kinds[:3] == ["TraceStart", "TurnStart", "Message"]
    assert isinstance(events[-1], TraceEnd)
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert [c.name for c in calls] == ["Bash", "Bash", "Write", "Bash"]
    assert calls[1].args == {
        "command": "cat /etc/hostname",
        "description": "Show hostname",
    }
    results = [e for e in events if isinstance(e, ToolResult)]
    assert [r.call_id for r in results] == [c.call_id for c in calls]
    assert results[0].result == "hello"
    assert results[-1].is_error is True
    assert str(results[-1].result).startswith("Exit code 2")


def test_codex_shell_is_spelled_as_in_the_rollout() -> None:
    """Codex hooks say Bash {command}; the event says exec_command {cmd}, like the rollout."""
    calls = [e for e in _all("codex") if isinstance(e, ToolCall)]
    assert calls[0].name == "exec_command"
    assert calls[0].args == {"cmd": "echo hello"}
    patch = next(c for c in calls if c.name == "apply_patch")
    assert patch.args is None
    assert patch.args_raw is not None
    assert patch.args_raw.startswith("*** Begin Patch")


def test_gemini_calls_get_ids_and_results_pair_by_input() -> None:
    """Gemini sends no call id: calls are numbered and AfterTool pairs by tool and input."""
    events = _all("gemini")
    calls = [e for e in events if isinstance(e, ToolCall)]
    results = [e for e in events if isinstance(e, ToolResult)]
    assert [c.call_id for c in calls] == [
        "gemini-1",
        "gemini-2",
        "gemini-3",
        "gemini-4",
    ]
    assert [r.call_id for r in results] == [
        "gemini-1",
        "gemini-2",
        "gemini-3",
        "gemini-4",
    ]
    assert "Output: hello" in str(results[0].result)
    assert isinstance(events[0], TraceStart)
    assert isinstance(events[1], TurnStart)
    assert isinstance(events[2], Message)


def test_payload_without_session_is_refused() -> None:
    """A payload with no session id raises ValueError naming the field."""
    with pytest.raises(ValueError, match="session_id"):
        translate(
            "claude-code",
            {"hook_event_name": "Stop"},
            now=0.0,
            open_calls=[],
            next_call=0,
        )
