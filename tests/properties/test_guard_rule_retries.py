"""A rule that forbids a call forbids it every time: the same call made
again at once (a new call id, the same tool, arguments and time) is refused
by every rule that refused it, whatever the suite and the stream."""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from test_guard_rules import Case, priced_streams, rule_suites

from trajgrade.engine.engine import Engine
from trajgrade.events import Event, ToolCall
from trajgrade.verdicts import Action


@settings(max_examples=300, deadline=None)
@given(case=rule_suites(), stream=priced_streams())
def test_a_refused_call_made_again_is_refused_again(case: Case, stream: object) -> None:
    events: list[Event] = []
    for i, e in enumerate(stream.events):  # type: ignore[attr-defined]
        if type(e) is ToolCall:
            e = msgspec.structs.replace(e, call_id=f"{e.call_id or ''}#{i}")
            events.append(e)
            e = msgspec.structs.replace(e, call_id=f"{e.call_id}-again")
        events.append(e)
    engine = Engine(case.suite)
    engine.feed_all(events)
    engine.finish()
    refused = {
        (d.trace_id, d.call_id, d.grader)
        for d in engine.decisions
        if d.call_id is not None and d.action is Action.DENY
    }
    # After an abort every call is refused by the grader that stopped the
    # run (not always the one that refused the call first).
    stopped = {
        (d.trace_id, d.call_id)
        for d in engine.decisions
        if d.call_id is not None and d.action is Action.ABORT
    }
    for trace, cid, grader in refused:
        if not cid.endswith("-again"):
            again = cid + "-again"
            assert (trace, again, grader) in refused or (trace, again) in stopped, (
                grader,
                cid,
            )
    for trace, cid in stopped:
        assert cid.endswith("-again") or (trace, cid + "-again") in stopped
