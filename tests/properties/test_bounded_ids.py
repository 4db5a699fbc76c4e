"""The bounded id memory behaves as the OrderedDict it replaced.

``trajgrade._util.bounded_ids.BoundedIds`` (the engine's closed ids, a run's
failed ids) keeps a dict and a deque of the same ids
instead of an ``OrderedDict`` (less memory per id). Its contract is the
OrderedDict's as the engine used it: ``add`` remembers an id at the end (an
id remembered already keeps its place and takes the new value), past the
bound the oldest id is forgotten and handed back, ``pop`` lets one go
from anywhere (a checkpoint's trace opens it again), ``items`` lists them
oldest first. Random sequences of those over a few ids and small bounds
are run against the OrderedDict model, and the deque stays bounded when
ids are let go and added again without end.
"""

from __future__ import annotations

from collections import OrderedDict

from hypothesis import given, settings
from hypothesis import strategies as st

from trajgrade._util.bounded_ids import BoundedIds

IDS = st.sampled_from([f"t{i}" for i in range(8)])
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), IDS, st.booleans()),
        st.tuples(st.just("pop"), IDS, st.just(False)),
    ),
    max_size=80,
)


class _Model:
    """The OrderedDict the engine used, with its eviction."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self.d: OrderedDict[str, bool] = OrderedDict()

    def add(self, tid: str, ended: bool) -> str | None:
        self.d[tid] = ended
        if len(self.d) > self.bound:
            return self.d.popitem(last=False)[0]
        return None

    def pop(self, tid: str) -> bool | None:
        return self.d.pop(tid, None)


@settings(max_examples=300, deadline=None)
@given(bound=st.integers(min_value=1, max_value=5), ops=OPS)
def test_bounded_ids_match_the_ordered_dict(
    bound: int, ops: list[tuple[str, str, bool]]
) -> None:
    real, model = BoundedIds(bound), _Model(bound)
    for op, tid, ended in ops:
        if op == "add":
            assert real.add(tid, ended) == model.add(tid, ended)
        else:
            assert real.pop(tid) == model.pop(tid)
        assert real.items() == list(model.d.items())
        assert len(real) == len(model.d)
        for other in (f"t{i}" for i in range(8)):
            assert (other in real) == (other in model.d)
            assert real.get(other) == model.d.get(other)


def test_forgets_the_oldest_first_at_the_bound() -> None:
    ids = BoundedIds(3)
    assert [ids.add(t, True) for t in "abc"] == [None, None, None]
    assert ids.add("a", False) is None  # (known: keeps its place)
    assert [ids.add(t, True) for t in "de"] == ["a", "b"]
    assert ids.items() == [("c", True), ("d", True), ("e", True)]
    # One let go from the middle and closed again goes to the end; its old
    # place is passed over when the order comes to it.
    ids.pop("d")
    assert ids.add("d", False) is None
    assert [ids.add(t, True) for t in "fg"] == ["c", "e"]
    assert ids.items() == [("d", False), ("f", True), ("g", True)]


def test_the_order_stays_bounded_when_ids_come_back() -> None:
    """A trace opened again by a checkpoint and closed again, over and over:
    the deque's stale places are dropped, not kept without end."""
    ids = BoundedIds(4)
    for t in "abcd":
        ids.add(t, True)
    for _ in range(1000):
        ids.pop("b")
        ids.add("b", True)
    assert len(ids._order) <= 2 * 4 + 1
    assert ids.items() == [("a", True), ("c", True), ("d", True), ("b", True)]
    assert [ids.add(t, True) for t in "xy"] == ["a", "c"]
