"""Every recorded file of the corpus, as bundled in ``tests/fixtures/``: the
bytes are the ones the provenance table names (sha256), the tool calls
trajgrade sees equal the count in the table, every call with a result is
paired, and the format detected is the one the table names.

``tests/fixtures/CORPUS.md`` is a copy of the corpus's ``SOURCES.md`` file
table; a clone with nothing beside it runs every case. Where
``TRAJGRADE_SHARED`` names a shared folder whose ``corpus/SOURCES.md`` lists
files that are not bundled, those are checked too (extra cases).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
from pathlib import Path

import pytest

from trajgrade.cli.convert import stats
from trajgrade.runtime.log import get_logger

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TABLE = FIXTURES / "CORPUS.md"
#: Files in the corpus table, all bundled.
CORPUS_FILES = 35


def _table(path: Path) -> tuple[list[tuple[str, str, int]], dict[str, str]]:
    """(file, format, tool calls) per row of the file table; file -> sha256."""
    rows, sums = [], {}
    for line in path.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not cells[0].startswith("`"):
            continue
        if len(cells) == 2:
            sums[cells[0].strip("`")] = cells[1].strip("`")
        elif len(cells) >= 8 and (m := re.match(r"(\d+)", cells[7])):
            rows.append((cells[0].strip("`"), cells[1], int(m[1])))
    return rows, sums


ROWS, SUMS = _table(TABLE)


def _extra_rows() -> list[tuple[str, str, int]]:
    """Rows of a shared corpus (``TRAJGRADE_SHARED``) whose files are not bundled."""
    shared = os.environ.get("TRAJGRADE_SHARED")
    sources = Path(shared or "/nonexistent") / "corpus" / "SOURCES.md"
    if not shared or not sources.is_file():
        return []
    bundled = {r[0] for r in ROWS}
    return [r for r in _table(sources)[0] if r[0] not in bundled]


EXTRA = _extra_rows()


def _bundled(name: str, tmp_path: Path) -> Path:
    """The fixture for a table row, decompressed into tmp_path if it is gzipped."""
    plain = FIXTURES / name
    if plain.is_file():
        return plain
    packed = FIXTURES / f"{name}.gz"
    assert packed.is_file(), f"{name} is in CORPUS.md but not in tests/fixtures/"
    out = tmp_path / Path(name).name
    out.write_bytes(gzip.decompress(packed.read_bytes()))
    return out


def test_the_corpus_table_is_complete() -> None:
    assert len(ROWS) == CORPUS_FILES
    assert set(SUMS) == {r[0] for r in ROWS}


def _check_counts(path: Path, name: str, calls: int) -> None:
    rows, errors = stats([str(path)], fmt="auto", log=get_logger())
    assert errors == 0
    seen = sum(sum(r.tool_calls.values()) for r in rows)
    assert seen == calls, (
        f"{name}: trajgrade sees {seen} tool calls, the corpus table says {calls}"
    )
    assert sum(r.results for r in rows) <= seen


CASES = [pytest.param(*r, False, id=r[0]) for r in ROWS] + [
    pytest.param(*r, True, id=f"shared:{r[0]}") for r in EXTRA
]


@pytest.mark.parametrize(("name", "fmt", "calls", "shared"), CASES)
def test_tool_calls_seen_equal_the_corpus_count(
    name: str, fmt: str, calls: int, shared: bool, tmp_path: Path
) -> None:
    if shared:
        _check_counts(
            Path(os.environ["TRAJGRADE_SHARED"]) / "corpus" / name, name, calls
        )
        return
    path = _bundled(name, tmp_path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert digest == SUMS[name], f"{name}: bytes differ from the corpus copy"
    _check_counts(path, name, calls)
