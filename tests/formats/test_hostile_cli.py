"""The user's path: ``trajgrade grade --format X FILE`` on a hostile version
of each format's recorded file, and the same bytes through a pipe that
delivers them a few bytes at a time (``cat FILE | trajgrade grade --format
X -``). Real ``python -m trajgrade`` processes.

No traceback and no crash status (3); every rejected record is reported on
stderr with its source and line; the pipe gives the verdicts the file gives.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from tests.formats._decode import DOCUMENTS
from tests.formats.test_every_adapter import _data
from tests.properties.test_fuzz_adapters import POLICY as FUZZ_POLICY
from tests.properties.test_fuzz_adapters import _mutated

from trajgrade.formats import BUILTIN
from trajgrade.pipeline.whole import grade_bytes

POLICY = """\
graders:
  - type: tool-call-count
    config: {max: 30}
  - type: token-budget
    config: {max: 100000}
  - type: turn-count
    config: {max: 15}
"""


def _grade(policy: Path, fmt: str, source: Path | None, data: bytes) -> tuple[Any, ...]:
    """(status, verdicts, rejections) of one ``trajgrade grade`` process;
    ``source`` None: ``data`` is written to its stdin in pieces of 1 to 64
    bytes."""
    cmd = [
        sys.executable,
        "-m",
        "trajgrade",
        "grade",
        "-c",
        str(policy),
        "--format",
        fmt,
    ]
    cmd.append(str(source) if source is not None else "-")
    # (Output to files: a full pipe must not stall the writer below.)
    with (
        tempfile.TemporaryFile() as out_file,
        tempfile.TemporaryFile() as err_file,
    ):
        proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=out_file, stderr=err_file
        )
        assert proc.stdin is not None
        if source is None:
            rng = random.Random(len(data))
            pos = 0
            while pos < len(data):
                step = rng.randint(1, 64)
                os.write(proc.stdin.fileno(), data[pos : pos + step])
                pos += step
        proc.stdin.close()
        proc.wait(timeout=120)
        out_file.seek(0)
        err_file.seek(0)
        out, err = out_file.read(), err_file.read()
    name = str(source) if source is not None else "-"
    verdicts = sorted(
        (_unnamed(v["trace_id"], name), v["grader"], v["outcome"], v["score"])
        for v in map(json.loads, out.decode().splitlines())
        if v.get("final")
    )
    logs = [json.loads(line) for line in err.decode().splitlines()]
    rejected = [r for r in logs if r.get("event") == "input_rejected"]
    assert b"Traceback" not in err, err.decode()[-2000:]
    return proc.returncode, verdicts, rejected, name


def _unnamed(trace: str, source: str) -> str:
    """A trace named after its source (``<source>``, ``<source>#2``) with
    the source's name left out: a file and stdin name them differently."""
    if trace == source or trace.startswith(f"{source}#"):
        return "<source>" + trace[len(source) :]
    return trace


@pytest.mark.parametrize("fmt", sorted(BUILTIN))
def test_a_hostile_file_and_a_slow_pipe_are_graded_alike(
    tmp_path: Path, fmt: str
) -> None:
    rng = random.Random(fmt)
    other = _data(rng.choice(sorted(set(BUILTIN) - {fmt})))
    data = _data(fmt)
    # Mutated until something is rejected (a few tries at most).
    for _ in range(50):
        dirty = _mutated(rng, fmt, data, other)
        if grade_bytes(FUZZ_POLICY, dirty, fmt=fmt).errors:
            break
    else:
        pytest.fail("no mutation was rejected")
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    log = tmp_path / f"hostile.{fmt}.log"
    log.write_bytes(dirty)
    status, verdicts, rejected, name = _grade(policy, fmt, log, dirty)
    assert status in (0, 1), rejected
    for r in rejected:
        assert r["source"] == name
        assert isinstance(r["line"], int), r
    piped = _grade(policy, fmt, None, dirty)
    assert piped[0] == status
    assert piped[1] == verdicts
    located = [(r["line"], r["field"]) for r in rejected]
    if fmt in DOCUMENTS:  # (an item's line is where its closing chunk ends)
        located = [(0, f) for _, f in located]
        assert [(0, r["field"]) for r in piped[2]] == located
    else:
        assert [(r["line"], r["field"]) for r in piped[2]] == located
