"""What the suite installs on first use (the real agent CLIs from npm,
``@agentv/core``, ``letta-evals``), made once before the first test, by
``pytest_collection_finish`` in ``tests/conftest.py``: so no test's
timeout includes an install, and a failed install is one loud line at the
start and a skip with its reason in every test that needs it, never an
error. Each installer goes through :func:`once`, in the warm-up and in the
tests alike, so a failure is not retried inside a test's timeout."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable

T = TypeVar("T")

_made: dict[str, Any] = {}
_failed: dict[str, str] = {}


def once(key: str, install: Callable[[], T]) -> T:
    """``install()``'s result, made the first time ``key`` is asked for; a
    skip it raised (a failed install) is remembered and raised again."""
    if key in _failed:
        pytest.skip(_failed[key])
    if key not in _made:
        try:
            _made[key] = install()
        except pytest.skip.Exception as exc:
            _failed[key] = str(exc.msg)
            raise
    result: T = _made[key]
    return result


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
    """Make every install the collected test files (``paths``) need."""
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
