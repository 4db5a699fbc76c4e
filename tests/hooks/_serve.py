"""A real ``trajgrade serve`` daemon for a test: started on a free loopback
port, its URL read from its first stdout line, killed by PID afterwards."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@contextmanager
def serving(
    policy: Path,
    state_dir: Path,
    *flags: str,
    stderr: int | IO[str] | None = subprocess.DEVNULL,
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """Yield (url, process) of ``trajgrade serve -c policy`` with ``flags``."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trajgrade",
            "serve",
            "-c",
            str(policy),
            "--port",
            "0",
            "--state-dir",
            str(state_dir),
            *flags,
        ],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), (
            proc.stderr.read() if proc.stderr else url
        )
        yield url, proc
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
