"""The order the suite's tests run in under pytest-xdist, so the run ends
when its last short test does, not when a long one started late does.

``--dist worksteal`` hands worker *i* the *i*-th contiguous share of the
collected items, and an idle worker takes the end of the longest queue. A
long test that sits late in file order (the Flink virtualenv's own pytest,
the SIGKILL crash test) therefore starts late and runs alone at the end
while the other workers idle. Here the modules holding the long tests
(``durations.json``: seconds measured in a whole run) are dealt out to the
workers, the longest first, each to the share with the fewest seconds so
far, and put at the front of that share; the rest of the suite fills the
shares in file order. A module moves whole, so its module-scoped fixtures
are still made once. Stolen work comes from the ends of the shares: short
tests.

``pytest --record-durations`` rewrites ``durations.json`` from the run's
own reports (tests/conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    import pytest

#: Seconds (setup + call + teardown) of the tests that took at least
#: :data:`LONG` in a whole run, by node id.
DURATIONS = Path(__file__).resolve().with_name("durations.json")
#: A test this long (seconds) is worth starting early.
LONG = 3.0


def known_durations(path: Path = DURATIONS) -> dict[str, float]:
    """The recorded seconds per node id; none when the file is missing or
    unreadable (the order is then file order: slower, never wrong)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        str(k): float(v)
        for k, v in data.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    }


def long_first(
    items: Sequence[pytest.Item], workers: int, seconds: dict[str, float]
) -> list[pytest.Item]:
    """``items`` reordered for ``workers`` worksteal workers (see the module
    docstring); the same list for one worker or when nothing is known."""
    if workers < 2 or not seconds:
        return list(items)
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(_module_of(item.nodeid), []).append(item)
    weight = {
        name: sum(seconds.get(item.nodeid, 0.0) for item in members)
        for name, members in modules.items()
    }
    heavy = sorted(
        (name for name, w in weight.items() if w >= LONG), key=lambda n: -weight[n]
    )
    if not heavy:
        return list(items)
    fronts: list[list[pytest.Item]] = [[] for _ in range(workers)]
    loads = [0.0] * workers
    for name in heavy:
        share = loads.index(min(loads))
        fronts[share].extend(modules[name])
        loads[share] += weight[name]
    moved = set(heavy)
    rest = [item for item in items if _module_of(item.nodeid) not in moved]
    return _fill(fronts, rest, _share_sizes(len(items), workers))


def _fill(
    fronts: list[list[pytest.Item]],
    rest: list[pytest.Item],
    sizes: list[int],
) -> list[pytest.Item]:
    """Each share: its front, then the next of ``rest`` up to its size (a
    front longer than its share pushes the rest on to the next)."""
    out: list[pytest.Item] = []
    start = 0
    for front, size in zip(fronts, sizes, strict=True):
        out += front
        take = max(0, size - len(front))
        out += rest[start : start + take]
        start += take
    out += rest[start:]
    return out


def _share_sizes(count: int, workers: int) -> list[int]:
    """How many items worksteal sends each worker at the start: the
    remaining items divided by the workers still to serve, in turn."""
    sizes = []
    left = count
    for remaining in range(workers, 0, -1):
        sizes.append(left // remaining)
        left -= sizes[-1]
    return sizes


def _module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def long_ones(
    phases: Iterable[tuple[str, float]], threshold: float = LONG
) -> dict[str, float]:
    """Seconds per node id summed over the reported phases, the tests of at
    least ``threshold`` seconds only, longest first (what durations.json holds)."""
    total: dict[str, float] = {}
    for nodeid, duration in phases:
        total[nodeid] = total.get(nodeid, 0.0) + duration
    kept = sorted(
        ((k, round(v, 1)) for k, v in total.items() if v >= threshold),
        key=lambda kv: -kv[1],
    )
    return dict(kept)


def write_durations(durations: dict[str, float], path: Path = DURATIONS) -> None:
    path.write_text(json.dumps(durations, indent=1) + "\n", encoding="utf-8")
