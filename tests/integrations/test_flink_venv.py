"""The Flink integration's tests (tests/integrations/test_flink.py), run in
the virtualenv they need (tests/integrations/_flink_venv.py says why), as
a pytest of their own: Flink's real local mini-cluster, real recorded
sessions, a restore from a checkpoint mid-stream. Where this interpreter
has pyflink itself, test_flink.py runs directly and this test skips."""

from __future__ import annotations

import importlib.util
import re
import subprocess

import pytest
from tests.integrations._flink_venv import ROOT, environment, flink_python

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

#: The tests of test_flink.py, all of which must pass there.
FLINK_TESTS = 5


@pytest.mark.skipif(
    importlib.util.find_spec("pyflink") is not None,
    reason="pyflink is importable here: tests/integrations/test_flink.py runs directly",
)
def test_the_flink_integration_in_its_own_virtualenv() -> None:
    python = flink_python()
    argv = [str(python), "-m", "pytest", "tests/integrations/test_flink.py"]
    argv += ["-q", "-p", "no:cacheprovider", "-rfE"]
    # One process: the virtualenv has no pytest-xdist for the suite's -n.
    argv += ["-o", "addopts=--strict-markers --strict-config --import-mode=importlib"]
    done = subprocess.run(
        argv,
        cwd=ROOT,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=1700,
        check=False,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-6000:]
    passed = re.search(r"(\d+) passed", out)
    assert passed is not None, out[-3000:]
    assert int(passed.group(1)) == FLINK_TESTS, out[-3000:]
