"""The metrics server (/metrics, /healthz, /readyz) on a real socket: it
answers, and a peer that connects and sends nothing, or drips its request,
is cut off after the server's timeout instead of holding a thread for ever
(the probes live here; starving them would get a pod restarted)."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from trajgrade.runtime.metrics import Metrics, MetricsServer

TIMEOUT = 0.5


@pytest.fixture
def server() -> Iterator[MetricsServer]:
    metrics = Metrics()
    metrics.set_ready(True)
    srv = MetricsServer(metrics, host="127.0.0.1", port=0, timeout=TIMEOUT)
    yield srv
    srv.close()


def _get(srv: MetricsServer, path: str) -> tuple[int, str, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.getheader("Content-Type") or "", r.read()
    finally:
        conn.close()


def test_probes_and_metrics_answer(server: MetricsServer) -> None:
    assert _get(server, "/healthz")[::2] == (200, b"ok\n")
    assert _get(server, "/readyz")[::2] == (200, b"ready\n")
    status, ctype, body = _get(server, "/metrics")
    assert status == 200 and ctype.startswith("text/plain; version=")
    assert b"trajgrade_open_traces" in body
    status, _, body = _get(server, "/nope?x=1")
    assert status == 404 and b"/healthz" in body


def _closed_by_peer(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        while sock.recv(1024):
            pass  # (a 408 answer, then the close)
    except TimeoutError:
        return False
    except ConnectionError:
        pass
    return True


def test_a_silent_connection_is_cut_after_the_timeout(server: MetricsServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        assert _closed_by_peer(sock, within=TIMEOUT * 8)


def test_a_dripped_request_is_cut_at_its_deadline(server: MetricsServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        started = time.monotonic()
        closed = False
        for byte in b"GET /healthz HTTP/1.1\r\nHost: x\r\n":
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                closed = True
                break
            time.sleep(TIMEOUT / 5)  # each read is quick; the head is not
            if time.monotonic() - started > TIMEOUT * 6:
                break
        assert closed or _closed_by_peer(sock, within=TIMEOUT * 4)
    assert _get(server, "/healthz")[0] == 200


def test_idle_connections_do_not_keep_threads(server: MetricsServer) -> None:
    before = threading.active_count()
    socks = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(40)]
    try:
        assert _get(server, "/healthz")[0] == 200  # answered meanwhile
        deadline = time.monotonic() + TIMEOUT * 10
        while threading.active_count() > before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert threading.active_count() <= before
    finally:
        for s in socks:
            s.close()
