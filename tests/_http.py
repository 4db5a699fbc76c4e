"""Raw HTTP/1.1 over a socket: requests a well-behaved client would never send."""

from __future__ import annotations

import socket
import time


def raw_request(
    port: int, data: bytes, *, timeout: float = 10.0, send_gap: float = 0.0
) -> tuple[int, dict[str, str], bytes, float]:
    """Send ``data`` as is; the status, headers, body and seconds to the answer.

    Status 0 means the server closed the connection without an answer.
    """
    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        if send_gap:
            time.sleep(send_gap)
        buf = b""
        while b"\r\n\r\n" not in buf:
            part = s.recv(65536)
            if not part:
                return 0, {}, buf, time.monotonic() - start
            buf += part
        head, _, body = buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {
            k.strip().lower(): v.strip()
            for k, _, v in (line.partition(":") for line in lines[1:])
        }
        length = int(headers.get("content-length", "0"))
        while len(body) < length:
            part = s.recv(65536)
            if not part:
                break
            body += part
        return status, headers, body, time.monotonic() - start


def post(path: str, body: bytes, headers: dict[str, str] | None = None) -> bytes:
    """A request's bytes: POST with the given headers (nothing added)."""
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def chunked(body: bytes, size: int = 7) -> bytes:
    """``body`` in chunked transfer coding, ``size`` bytes a chunk."""
    out = b""
    for i in range(0, len(body), size):
        part = body[i : i + size]
        out += f"{len(part):x}\r\n".encode() + part + b"\r\n"
    return out + b"0\r\n\r\n"
