"""The first-use installs of tests/_first_use.py across processes, as the
suite's xdist workers (and other checkouts' runs) make them: real
processes, a real file lock, real failure records."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: One process asking for an install: the install logs its start and end to
#: LOG (a pause between them, so two unlocked installs would interleave) and
#: fails (a skip) when FAIL is set; the process prints what ``once`` gave.
SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    sys.path.insert(0, sys.argv[1])
    import pytest
    from tests._first_use import once

    def install():
        with open(os.environ["LOG"], "a") as log:
            log.write(f"start {os.getpid()}\\n")
        time.sleep(0.2)
        with open(os.environ["LOG"], "a") as log:
            log.write(f"end {os.getpid()}\\n")
        if os.environ.get("FAIL"):
            pytest.skip("npm could not reach the registry")
        return "ready"

    try:
        print(once("some-cli@1.0 in /cache", install))
    except pytest.skip.Exception as exc:
        print("skipped:", exc.msg)
    """
)


def _workers(tmp_path: Path, n: int, run: str, **env: str) -> list[str]:
    """``n`` processes of one run (its xdist id) asking at once; their output."""
    environ = {
        **os.environ,
        "TMPDIR": str(tmp_path),  # the locks live under the temp directory
        "LOG": str(tmp_path / "installs.log"),
        "PYTEST_XDIST_TESTRUNUID": run,
        **env,
    }
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT, str(ROOT)],
            env=environ,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(n)
    ]
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        outs.append(out.strip())
    return outs


def _log(tmp_path: Path) -> list[str]:
    return (tmp_path / "installs.log").read_text().split()


def test_workers_install_one_at_a_time(tmp_path: Path) -> None:
    """Each worker's install runs under the lock: never two at once."""
    assert _workers(tmp_path, 3, uuid.uuid4().hex) == ["ready"] * 3
    words = _log(tmp_path)
    # (start, pid), (end, pid), ...: each end closes the start just before it.
    tokens = list(zip(words[0::2], words[1::2], strict=True))
    assert len(tokens) == 6, words
    for opened, closed in zip(tokens[0::2], tokens[1::2], strict=True):
        assert opened[0] == "start" and closed == ("end", opened[1]), words


def test_a_failed_install_is_tried_once_per_run(tmp_path: Path) -> None:
    """The first worker's failure is every worker's skip, with its reason;
    the next run tries again."""
    run = uuid.uuid4().hex
    assert (
        _workers(tmp_path, 3, run, FAIL="1")
        == ["skipped: npm could not reach the registry"] * 3
    )
    assert _log(tmp_path).count("start") == 1
    assert _workers(tmp_path, 1, uuid.uuid4().hex, FAIL="1") == [
        "skipped: npm could not reach the registry"
    ]
    assert _log(tmp_path).count("start") == 2
