"""The optional grader capabilities: probed once per Suite, with the
defaults graders.capabilities documents, the odd cases included."""

from __future__ import annotations

from typing import Any

from tests._support import suite as compiled

from trajgrade.config.model import Suite
from trajgrade.engine.engine import Engine
from trajgrade.events import Message, ToolResult
from trajgrade.graders.capabilities import NO_HANDLERS, Capabilities
from trajgrade.verdicts import Decision, Outcome


class Bare:
    """A third-party grader offering none of the optional capabilities."""

    kind = "bare"
    name = "bare"
    state_type = dict
    event_types = frozenset({Message, ToolResult})
    uses_clock = True

    def start(self) -> dict[str, Any]:
        return {}

    def step(self, state: Any, event: Any) -> Decision | None:
        return None

    def tick(self, state: Any, *, elapsed: float) -> Decision | None:
        return None

    def finish(self, state: Any) -> Decision:
        return Decision(outcome=Outcome.PASS, score=1.0)


def test_a_grader_offering_nothing_gets_every_default() -> None:
    caps = Capabilities.of(Bare())
    assert caps == Capabilities(
        handlers=NO_HANDLERS,
        call_handler=None,
        judge=None,
        judges_call=None,
        deadline=None,
        reads_results=True,  # it routes tool results
        packs_state=False,  # not trajgrade's own
        matchers=None,
        bindings=None,
    )
    engine = Engine(Suite([Bare()], fingerprint="f", source="<test>"))
    assert engine._packer is None  # clocked without a deadline, and a plug-in's
    assert not engine._clock.by_deadline
    assert engine._guard.judges == ()


def test_judge_and_deadline_count_only_when_callable() -> None:
    class Odd(Bare):
        judge = "not a method"
        deadline = None
        reads_result = 0  # falsy: the decoders may skip results
        packs_state = 1

    caps = Capabilities.of(Odd())
    assert caps.judge is None
    assert caps.deadline is None
    assert caps.reads_results is False
    assert caps.packs_state is True


def test_a_suite_built_in_code_probes_its_graders() -> None:
    """compile_suite and Suite(...) go through the same probe."""
    built = compiled(
        "graders:\n  - {type: tool-calls, name: a, config: {disallowed: [curl]}}\n"
        "  - {type: wall-time, name: w, config: {max: 60s}}\n"
    )
    again = Suite(built.graders, fingerprint=built.fingerprint, source=built.source)
    assert again.capabilities == built.capabilities
    tool_calls, wall_time = built.capabilities
    assert tool_calls.judge is not None and tool_calls.call_handler is not None
    assert tool_calls.matchers is not None and tool_calls.packs_state
    assert wall_time.deadline is not None and tool_calls.deadline is None
