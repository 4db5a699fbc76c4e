"""The log edge: JSON lines on stderr, written without importing structlog
(asyncio, ssl) or rich; a terminal gets structlog's console renderer.

Each case runs in its own interpreter, because what is imported (and when)
is the behaviour under test.
"""

from __future__ import annotations

import json
import subprocess
import sys

_LOG_ONE_LINE = """
import io, sys
from trajgrade.runtime import log as log
out = io.BytesIO()
log.configure(stream=out, json={json})
log.get_logger(source="a.jsonl").warning("source_changed", offset=3)
sys.stderr.write(out.getvalue().decode())
print(*(m in sys.modules for m in ("rich", "structlog", "asyncio", "ssl")))
"""


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )


def test_json_logging_loads_neither_structlog_nor_rich() -> None:
    """structlog imports asyncio (and ssl) at its top, and structlog.dev rich:
    a run writing JSON lines (a pipe, a file) needs none of them."""
    proc = _run(_LOG_ONE_LINE.format(json=True))
    assert proc.stdout.split() == ["False", "False", "False", "False"]
    [line] = proc.stderr.splitlines()
    record = json.loads(line)
    assert record["event"] == "source_changed"
    assert record["level"] == "warning"
    assert record["source"] == "a.jsonl"
    assert record["offset"] == 3


def test_rich_imports_after_json_logging_started() -> None:
    """Nothing is hidden from later imports: the live status line loads rich."""
    code = _LOG_ONE_LINE.format(json=True) + (
        "import rich.console\nprint(rich.console.Console is not None)\n"
    )
    assert _run(code).stdout.split() == ["False", "False", "False", "False", "True"]


def test_console_logging_keeps_structlog_as_it_is() -> None:
    """Readable lines (a terminal) import structlog unchanged, rich and all."""
    proc = _run(_LOG_ONE_LINE.format(json=False))
    assert proc.stdout.split()[:2] == ["True", "True"]
    assert "source_changed" in proc.stderr
