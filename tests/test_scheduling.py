"""The suite's xdist order (tests/_scheduling.py): long modules first, dealt
out to the workers' shares, nothing lost or doubled."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from hypothesis import given
from hypothesis import strategies as st
from tests._scheduling import (
    DURATIONS,
    LONG,
    _share_sizes,
    known_durations,
    long_first,
    long_ones,
)

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


@dataclass(frozen=True)
class _Item:
    nodeid: str


def _items(ids: list[str]) -> list[pytest.Item]:
    return cast("list[pytest.Item]", [_Item(i) for i in ids])


def _ids(items: list[Any]) -> list[str]:
    return [i.nodeid for i in items]


def test_long_modules_lead_the_shares_of_different_workers() -> None:
    ids = [f"tests/m{m}.py::t{t}" for m in range(6) for t in range(10)]
    seconds = {
        "tests/m5.py::t9": 100.0,
        "tests/m4.py::t0": 60.0,
        "tests/m3.py::t3": 50.0,
    }
    out = _ids(long_first(_items(ids), 2, seconds))
    first, second = out[:30], out[30:]
    # m5 (100 s) leads one share; m4 and m3 (110 s together) the other.
    assert first[:10] == [f"tests/m5.py::t{t}" for t in range(10)]
    assert second[:20] == [f"tests/m{m}.py::t{t}" for m in (4, 3) for t in range(10)]
    # The rest keeps file order, module by module.
    assert first[10:] == [f"tests/m{m}.py::t{t}" for m in (0, 1) for t in range(10)]
    assert second[20:] == [f"tests/m2.py::t{t}" for t in range(10)]


def test_one_worker_or_nothing_known_keeps_file_order() -> None:
    ids = [f"tests/m{m}.py::t" for m in range(5)]
    assert _ids(long_first(_items(ids), 1, {"tests/m4.py::t": 90.0})) == ids
    assert _ids(long_first(_items(ids), 4, {})) == ids


@given(
    modules=st.lists(st.integers(1, 8), min_size=1, max_size=12),
    workers=st.integers(1, 6),
    data=st.data(),
)
def test_the_order_is_a_permutation_with_modules_kept_whole(
    modules: list[int], workers: int, data: st.DataObject
) -> None:
    ids = [f"tests/m{m}.py::t{t}" for m, n in enumerate(modules) for t in range(n)]
    seconds = {
        i: data.draw(st.floats(0, 200))
        for i in data.draw(st.sets(st.sampled_from(ids)))
    }
    out = _ids(long_first(_items(ids), workers, seconds))
    assert sorted(out) == sorted(ids)
    # A module moved for its long tests stays together and in its own order
    # (the others are split by count, as worksteal splits file order).
    for m in range(len(modules)):
        mine = [i for i in ids if i.startswith(f"tests/m{m}.py::")]
        if sum(seconds.get(i, 0.0) for i in mine) >= LONG:
            at = out.index(mine[0])
            assert out[at : at + len(mine)] == mine


@given(count=st.integers(0, 5000), workers=st.integers(1, 16))
def test_shares_cover_every_item_as_worksteal_splits_them(
    count: int, workers: int
) -> None:
    sizes = _share_sizes(count, workers)
    assert sum(sizes) == count and len(sizes) == workers
    assert max(sizes) - min(sizes) <= 1


def test_recorded_durations_sum_phases_and_keep_the_long_ones() -> None:
    phases = [("a", 1.0), ("a", 2.5), ("b", 0.5), ("c", 9.0)]
    assert long_ones(phases) == {"c": 9.0, "a": 3.5}


def test_a_missing_or_malformed_file_is_no_durations(tmp_path: Path) -> None:
    assert known_durations(tmp_path / "none.json") == {}
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2")
    assert known_durations(bad) == {}
    bad.write_text(json.dumps({"x": "slow", "y": 4, "z": True}))
    assert known_durations(bad) == {"y": 4.0}


def test_the_bundled_file_names_collected_modules() -> None:
    """durations.json is read (a stale id only loses its head start)."""
    seconds = known_durations(DURATIONS)
    assert seconds, "tests/durations.json is missing or unreadable"
    root = DURATIONS.parents[1]
    assert any((root / i.split("::")[0]).exists() for i in seconds)
