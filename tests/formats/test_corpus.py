"""Every recorded file of the shared corpus, read where it lies: the tool calls
trajgrade sees equal the count in the corpus's ``SOURCES.md``, every call
with a result is paired, and the format detected is the one the table names.

(Most of these files are also fixtures under ``tests/fixtures/`` with their
own, more detailed checks; this test covers the whole corpus in one place,
including the few files that are not copied.)
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from trajgrade.convert import stats
from trajgrade.log import get_logger

SHARED = Path(
    os.environ.get("TRAJGRADE_SHARED", Path(__file__).resolve().parents[3] / "shared")
)
CORPUS = SHARED / "corpus"
SOURCES = CORPUS / "SOURCES.md"


def _rows() -> list[tuple[str, str, int]]:
    """(file, format, tool calls) for each row of the corpus's file table."""
    if not SOURCES.exists():
        return []
    rows = []
    for line in SOURCES.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 8 or not cells[0].startswith("`"):
            continue
        m = re.match(r"(\d+)", cells[7])
        if m:
            rows.append((cells[0].strip("`"), cells[1], int(m[1])))
    return rows


ROWS = _rows()


def test_the_corpus_table_is_there() -> None:
    if not SOURCES.exists():
        pytest.skip(f"shared corpus not found at {CORPUS}; set TRAJGRADE_SHARED")
    assert len(ROWS) == 35


@pytest.mark.parametrize(("name", "fmt", "calls"), ROWS, ids=[r[0] for r in ROWS])
def test_tool_calls_seen_equal_the_corpus_count(
    name: str, fmt: str, calls: int
) -> None:
    rows, errors = stats([str(CORPUS / name)], fmt="auto", log=get_logger())
    assert errors == 0
    seen = sum(sum(r.tool_calls.values()) for r in rows)
    assert seen == calls, (
        f"{name}: trajgrade sees {seen} tool calls, SOURCES.md says {calls}"
    )
    assert sum(r.results for r in rows) <= seen
