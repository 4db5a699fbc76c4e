"""Which rotated files come after the one last read, in which order.

File times are coarse (one kernel tick), so rotations in quick succession
leave files with equal times; the names must then order them, or a file
rotated away unseen is skipped (issue 35: the 2 k lines/s soak lost the
3 calls of a file rotated twice within one tick).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trajgrade.sources._lineage import rotated_since

T0 = 1_767_225_600 * 10**9


def _file(path: Path, mtime_ns: int, text: str = "x\n") -> tuple[int, int]:
    path.write_text(text)
    os.utime(path, ns=(mtime_ns, mtime_ns))
    st = path.stat()
    return st.st_dev, st.st_ino


def _names(paths: list[str]) -> list[str]:
    return [os.path.basename(p) for p in paths]


def test_a_file_rotated_within_the_same_tick_is_not_skipped(tmp_path: Path) -> None:
    """Read `x`, rotated to `x.2` by two rotations within one tick; `x.1`
    (the file between) has the same time and is still found."""
    log = tmp_path / "x.jsonl"
    read = _file(tmp_path / "x.jsonl.2", T0)
    _file(tmp_path / "x.jsonl.1", T0)
    now = _file(log, T0)
    found = rotated_since(str(log), T0, {read, now}, read)
    assert _names(found) == ["x.jsonl.1"]


def test_files_rotated_before_it_in_the_same_tick_are_not_read_again(
    tmp_path: Path,
) -> None:
    log = tmp_path / "x.jsonl"
    _file(tmp_path / "x.jsonl.4", T0)  # rotated before the one read
    read = _file(tmp_path / "x.jsonl.3", T0)
    _file(tmp_path / "x.jsonl.2", T0)
    _file(tmp_path / "x.jsonl.1", T0 + 1)
    now = _file(log, T0 + 2)
    found = rotated_since(str(log), T0, {read, now}, read)
    assert _names(found) == ["x.jsonl.2", "x.jsonl.1"]


def test_dated_names_count_forward(tmp_path: Path) -> None:
    log = tmp_path / "x.jsonl"
    read = _file(tmp_path / "x.jsonl-20260102", T0)
    _file(tmp_path / "x.jsonl-20260101", T0)
    _file(tmp_path / "x.jsonl-20260104", T0)
    _file(tmp_path / "x.jsonl-20260103", T0)
    found = rotated_since(str(log), T0, {read}, read)
    assert _names(found) == ["x.jsonl-20260103", "x.jsonl-20260104"]


def test_a_tie_the_names_cannot_settle_is_read(tmp_path: Path) -> None:
    """Another naming beside the reference's: read (a duplicate can be
    told; a file skipped is lost)."""
    log = tmp_path / "x.jsonl"
    read = _file(tmp_path / "x.jsonl.1", T0)
    _file(tmp_path / "x.jsonl-old", T0)
    assert _names(rotated_since(str(log), T0, {read}, read)) == ["x.jsonl-old"]
    assert _names(rotated_since(str(log), T0, {read})) == ["x.jsonl-old"]


def test_compressed_and_older_files_are_left(tmp_path: Path) -> None:
    log = tmp_path / "x.jsonl"
    read = _file(tmp_path / "x.jsonl.2", T0)
    _file(tmp_path / "x.jsonl.1.gz", T0 + 5)
    _file(tmp_path / "x.jsonl.3", T0 - 1)
    _file(tmp_path / "other.jsonl.1", T0 + 5)
    assert rotated_since(str(log), T0, {read}, read) == []


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 3), min_size=2, max_size=7),
    st.data(),
)
def test_exactly_the_files_rotated_after_the_one_read_oldest_first(
    tmp_path_factory: pytest.TempPathFactory, gaps: list[int], data: st.DataObject
) -> None:
    """Numbered rotations with coarse times (each file written no earlier
    than the one before it; ties anywhere): after any file read, the files
    rotated after it, in rotation order, and nothing else."""
    directory = tmp_path_factory.mktemp("rot")
    log = directory / "x.jsonl"
    n = len(gaps)
    times = [T0 + sum(gaps[: i + 1]) for i in range(n)]  # oldest first
    # File i (0 = oldest) now lives at x.(n - i): the newest at x.1.
    ids = [_file(directory / f"x.jsonl.{n - i}", times[i]) for i in range(n)]
    now = _file(log, times[-1] + data.draw(st.integers(0, 2)))
    read = data.draw(st.integers(0, n - 1))
    found = rotated_since(str(log), times[read], {ids[read], now}, ids[read])
    assert _names(found) == [f"x.jsonl.{n - i}" for i in range(read + 1, n)]
