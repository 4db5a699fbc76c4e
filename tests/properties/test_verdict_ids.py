"""Verdict ids include the policy's digest: one policy keeps its ids, two
policies never share one (issue 36: a consumer that drops duplicates by id
across a policy change must not drop the changed verdict)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from tests._support import call, end, suite

from trajgrade import Engine
from trajgrade.verdicts import verdict_id

_TOOL = st.sampled_from(["bash", "view", "edit", "grep"])
_NAMES = st.text(alphabet="abcdefgh", min_size=1, max_size=6)


def _policy(forbidden: str) -> str:
    return (
        f"graders:\n  - type: tool-calls\n    config: {{disallowed: [{forbidden}]}}\n"
    )


@given(trace=_NAMES, tools=st.lists(_TOOL, min_size=1, max_size=5), a=_TOOL, b=_TOOL)
def test_two_policies_give_two_ids_one_policy_one(
    trace: str, tools: list[str], a: str, b: str
) -> None:
    """The same trace graded under two policies (one may pass where the
    other fails) never shares an id; graded twice under one, it keeps it."""
    events = [call(t, str(i), trace=trace) for i, t in enumerate(tools)]
    events.append(end(trace))

    def ids(policy: str) -> list[str]:
        engine = Engine(suite(policy))
        return [v.id for v in engine.feed_all(events) + engine.finish()]

    first, again = ids(_policy(a)), ids(_policy(a))
    assert first == again
    if a != b:
        assert not set(first) & set(ids(_policy(b)))


@given(trace=_NAMES, grader=_NAMES, p=st.text(max_size=16), q=st.text(max_size=16))
def test_verdict_id_depends_on_the_digest(
    trace: str, grader: str, p: str, q: str
) -> None:
    """verdict_id itself: equal digests, equal ids; different ones differ
    (blake2b-64: a collision in a handful of examples would be a bug)."""
    for final in (True, False):
        mine = verdict_id(trace, grader, final=final, policy=p)
        assert mine == verdict_id(trace, grader, final=final, policy=p)
        if p != q:
            assert mine != verdict_id(trace, grader, final=final, policy=q)
