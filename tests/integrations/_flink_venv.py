"""A virtualenv for the Flink tests, made on first use (tests/_first_use.py).

``apache-flink`` pins Apache Beam, which holds ``protobuf < 6``; the suite's
own environment has a newer one (opentelemetry-proto, googleapis-common-
protos), so the Flink integration cannot be installed beside it. Its tests
run in a virtualenv of their own instead: this checkout's dependencies with
the ``[flink]`` extra, pytest and pytest-timeout, made once in the cache
(remade when the dependencies it is made from change) and run with this checkout's
``src`` first on the path, so the code under test is the checkout's.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests._first_use import once

ROOT = Path(__file__).resolve().parents[2]
#: What the Flink tests need beside the checkout and its [flink] extra.
TEST_DEPS = ("pytest>=8.2", "pytest-timeout>=2.3", "hypothesis>=6.100")


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "trajgrade-flink"
    return Path(os.environ.get("TRAJGRADE_FLINK_CACHE", default))


def flink_python() -> Path:
    """The python of the Flink virtualenv (skips, loudly, when it cannot be
    made: no JDK, no network for pip)."""
    return once(f"apache-flink virtualenv in {cache_dir()}", _flink_python)


def _skip(detail: str) -> None:
    reason = f"LOUD SKIP: the Flink integration is NOT TESTED: {detail.strip()[-800:]}"
    print(reason, file=sys.stderr)
    pytest.skip(reason)


def _flink_python() -> Path:
    if shutil.which("java") is None:
        _skip("no java on PATH (Flink's mini-cluster needs a JDK 11 or 17)")
    digest = _requirements_digest()
    home = cache_dir() / f"venv-{digest}"
    python = home / "bin" / "python"
    marker = home / ".installed"
    if marker.exists():
        return python
    if home.exists():
        shutil.rmtree(home)  # (a half-made one)
    steps = [
        [sys.executable, "-m", "venv", str(home)],
        [str(python), "-m", "pip", "install", "--quiet", f"{ROOT}[flink]", *TEST_DEPS],
    ]
    for argv in steps:
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, timeout=1200, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            _skip(f"{' '.join(argv)}: {exc}")
        if done.returncode != 0:
            _skip(f"{' '.join(argv)} exited {done.returncode}: {done.stderr}")
    marker.write_text(digest + "\n")
    return python


def _requirements_digest() -> str:
    """What the virtualenv is made from: the project's dependencies, its
    ``[flink]`` extra and :data:`TEST_DEPS` (not the rest of pyproject.toml:
    a ruff setting does not call for a six-minute install)."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [
        *project.get("dependencies", []),
        *project.get("optional-dependencies", {}).get("flink", []),
        *TEST_DEPS,
    ]
    return hashlib.sha256("\n".join(wanted).encode()).hexdigest()[:12]


def environment() -> dict[str, str]:
    """The Flink tests' environment: this checkout's code first."""
    env = {k: v for k, v in os.environ.items() if "PYFLINK" not in k}
    return env | {"PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
