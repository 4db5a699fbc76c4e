"""What the suite installs on first use (the real agent CLIs from npm,
``@agentv/core``, ``letta-evals``), made once before the first test, by
``pytest_collection_finish`` in ``tests/conftest.py``: so no test's
timeout includes an install, and a failed install is one loud line at the
start and a skip with its reason in every test that needs it, never an
error. Each installer goes through :func:`once`, in the warm-up and in the
tests alike, so a failure is not retried inside a test's timeout.

The installs go into caches shared by every process on the machine (the
suite's xdist workers, and other checkouts' runs): :func:`once` holds a
file lock per install while it makes or checks one, so two processes never
write one cache at once and the second finds the first's result. A failure
is written beside the lock for the other workers of the same run
(``PYTEST_XDIST_TESTRUNUID``), which skip with it instead of trying again."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest
from filelock import FileLock, Timeout

if TYPE_CHECKING:
    from collections.abc import Callable

T = TypeVar("T")

_made: dict[str, Any] = {}
_failed: dict[str, str] = {}

#: Where the locks and the failures of this run's installs are kept: one
#: place for every checkout, as the caches they guard are.
LOCKS = Path(tempfile.gettempdir()) / "trajgrade-first-use"
#: The run this process belongs to: the xdist workers of one run share it.
RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID") or uuid.uuid4().hex
#: Longer than an install may take (npm's and pip's own timeouts are 600 s):
#: past it, the process holding the lock is taken to be stuck.
LOCK_WAIT = 900.0


def once(key: str, install: Callable[[], T]) -> T:
    """``install()``'s result, made the first time ``key`` is asked for in
    this process, under the install's file lock; a skip it raised (a failed
    install), here or in another worker of this run, is raised again."""
    if key in _failed:
        pytest.skip(_failed[key])
    if key not in _made:
        stem = LOCKS / hashlib.sha256(key.encode()).hexdigest()[:16]
        LOCKS.mkdir(parents=True, exist_ok=True)
        try:
            with FileLock(f"{stem}.lock", timeout=LOCK_WAIT):
                _made[key] = _install(key, install, Path(f"{stem}.failed"))
        except Timeout:
            _failed[key] = (
                f"first-use install of {key} not made: another process has held "
                f"its lock {stem}.lock for {LOCK_WAIT:.0f} s"
            )
            pytest.skip(_failed[key])
    result: T = _made[key]
    return result


def _install(key: str, install: Callable[[], T], failure: Path) -> T:
    try:
        earlier = json.loads(failure.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        earlier = None
    if isinstance(earlier, dict) and earlier.get("run") == RUN:
        _failed[key] = str(earlier.get("reason"))
        pytest.skip(_failed[key])
    try:
        return install()
    except pytest.skip.Exception as exc:
        _failed[key] = str(exc.msg)
        failure.write_text(
            json.dumps({"run": RUN, "reason": _failed[key]}), encoding="utf-8"
        )
        raise


def _claude(version_name: str) -> Callable[[], object]:
    def install() -> object:
        from tests.hooks import test_real_agents as m

        return m._claude(getattr(m, version_name))

    return install


def _npm(name: str) -> Callable[[], object]:
    def install() -> object:
        if name == "codex":
            from tests.hooks.test_real_agents_codex import _codex

            return _codex()
        from tests.hooks.test_real_agents_gemini import _gemini

        return _gemini()

    return install


def _upstream(name: str) -> Callable[[], object]:
    def install() -> object:
        from tests.differential import _upstream as m

        return m.agentv_home() if name == "agentv" else m.letta_python()

    return install


def _flink() -> object:
    from tests.integrations._flink_venv import flink_python

    return flink_python()


CLAUDE = ("Claude Code", _claude("CLAUDE_VERSION"))
CLAUDE_LATEST = ("Claude Code (latest)", _claude("LATEST_CLAUDE"))
CODEX = ("Codex", _npm("codex"))
GEMINI = ("Gemini CLI", _npm("gemini"))
AGENTV = ("@agentv/core", _upstream("agentv"))
LETTA = ("letta-evals", _upstream("letta"))
FLINK = ("apache-flink (a virtualenv of its own)", _flink)

#: Test files (a path prefix under the repository) -> the installs they use.
NEEDS: dict[str, tuple[tuple[str, Callable[[], object]], ...]] = {
    "tests/hooks/test_real_agents": (CLAUDE, CLAUDE_LATEST, CODEX, GEMINI),
    "tests/telemetry/test_claude_code_otlp.py": (CLAUDE,),
    "tests/telemetry/test_agents_otlp.py": (CODEX, GEMINI),
    "tests/differential/": (AGENTV, LETTA),
    "tests/integrations/test_flink_venv.py": (FLINK,),
}


def warm_up(paths: set[str], say: Callable[[str], None]) -> None:
    """Make every install the collected test files (``paths``) need. Every
    xdist worker makes them (none starts a test before): the first under each
    lock installs, the others find the result."""
    wanted: dict[str, Callable[[], object]] = {}
    for prefix, installs in NEEDS.items():
        if any(p.startswith(prefix) for p in paths):
            wanted.update(installs)
    for label, install in wanted.items():
        start = time.monotonic()
        try:
            install()
        except pytest.skip.Exception as exc:
            say(f"first-use install of {label} FAILED; its tests skip: {exc.msg}")
        else:
            say(
                f"first-use install of {label}: ready ({time.monotonic() - start:.0f} s)"
            )
