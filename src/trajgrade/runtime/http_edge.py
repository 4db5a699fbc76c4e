"""The one HTTP edge of trajgrade's servers: hook daemon and OTLP receiver.

Both run on the standard library's ``ThreadingHTTPServer`` (no new
dependency, sub-millisecond answers with Nagle off), hardened here once with
explicit limits, because the stock handler trusts its peer:

* **framing**: a ``Content-Length`` that is not a non-negative decimal, both
  ``Content-Length`` and ``Transfer-Encoding``, or a broken chunk is ``400``
  (and the connection is closed: its framing cannot be trusted);
  ``Transfer-Encoding: chunked`` bodies are read;
* **size**: a body over ``max_body`` bytes, on the wire or once gunzipped
  (a gzip bomb is stopped at the limit, never inflated in full), is ``413``;
* **time**: a request's head (and a keep-alive's idle wait before it) has
  ``timeout`` seconds in all, however it is dripped (slowloris), and a whole
  body ``body_timeout``: every socket read waits at most what is left; a
  peer that promised more than it sends gets ``408`` (or, mid-head, is
  closed) and its handler thread is freed;
* **encoding**: ``Content-Encoding`` ``gzip`` or ``identity``, else ``415``;
* **auth**: with a token, a request without ``Authorization: Bearer TOKEN``
  is ``401``;
* **no tracebacks**: whatever a request does, the server logs one line and
  answers (or closes), never printing a stack to stderr.

Loopback only unless the caller allows other addresses explicitly.
"""

from __future__ import annotations

import hmac
import io
import socket
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Final

import msgspec

from trajgrade.errors import BindError

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = (
    "LOOPBACK",
    "EdgeHandler",
    "EdgeServer",
    "HttpError",
    "Limits",
    "bind_error",
    "check_host",
)

LOOPBACK: Final = ("127.0.0.1", "::1", "localhost")
_CHUNK_LINE: Final = 1024  # a chunk-size line is hex digits and extensions
_READ: Final = 64 * 1024


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """What one request may cost the server."""

    #: Largest body, after gzip decompression too.
    max_body: int = 16 * 1024 * 1024
    #: Seconds each socket read may wait (also a keep-alive's idle time).
    timeout: float = 30.0
    #: Seconds a whole body may take to arrive.
    body_timeout: float = 30.0
    #: When set, requests need ``Authorization: Bearer <token>``.
    token: str | None = None


class HttpError(Exception):
    """A request the edge refuses: its status and a one-line reason."""

    def __init__(self, status: int, message: str, *, close: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        #: The rest of the request is unread: the connection must close.
        self.close = close


def check_host(host: str, *, allow_remote: bool, what: str) -> None:
    """Refuse a non-loopback address unless the user asked for one."""
    if not allow_remote and host not in LOOPBACK:
        msg = f"{what} listens on loopback only (got host {host!r}); use 127.0.0.1, or allow other addresses explicitly (and set a token)"
        raise ValueError(msg)


#: How long, and for how many bytes, a connection whose body was refused
#: with 413 is drained so that its client reads the answer.
LINGER_SECONDS: Final = 2.0
LINGER_BYTES: Final = 64 * 1024 * 1024


class EdgeServer(ThreadingHTTPServer):
    """A threading server whose handlers never print tracebacks."""

    daemon_threads = True
    #: Connections the kernel queues before they are accepted (socketserver's
    #: 5 makes a burst of clients wait seconds for SYN retries).
    request_queue_size = 128
    #: Failed requests are reported here: ``(event, fields)``.
    report: Callable[[str, dict[str, Any]], None]

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[EdgeHandler],
        *,
        limits: Limits,
        allow_remote: bool = False,
        what: str = "trajgrade",
    ) -> None:
        check_host(address[0], allow_remote=allow_remote, what=what)
        self.limits = limits
        self.report = _ignore
        super().__init__(address, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """socketserver would print a traceback; one log line instead."""
        import sys

        exc = sys.exc_info()[1]
        self.report(
            "http_request_failed",
            {"client": str(client_address), "error": f"{type(exc).__name__}: {exc}"},
        )


def _ignore(event: str, fields: dict[str, Any]) -> None:
    pass


class _Deadlined(io.RawIOBase):
    """A connection's reads, each waiting at most what is left of its
    handler's deadline: the stock per-read timeout alone lets a peer that
    sends a byte now and then hold a thread for ever."""

    def __init__(self, sock: socket.socket, handler: EdgeHandler) -> None:
        self._sock = sock
        self._handler = handler

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self._handler.deadline - time.monotonic()
        if left <= 0:
            msg = "request took longer than its time limit"
            raise TimeoutError(msg)
        self._sock.settimeout(min(self._handler.server.limits.timeout, left))
        return self._sock.recv_into(buffer)


class EdgeHandler(BaseHTTPRequestHandler):
    """Request handler with bounded, validated body reading."""

    protocol_version = "HTTP/1.1"
    # Header and body are separate writes; with Nagle on, a keep-alive
    # client's delayed ACK would hold every answer back ~40 ms.
    disable_nagle_algorithm = True
    server: EdgeServer
    #: When the current request's head (or body) must have arrived.
    deadline: float = 0.0

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.limits.timeout)
        self.rfile = io.BufferedReader(_Deadlined(self.connection, self), _READ)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # one line per request would swamp the log

    def handle_one_request(self) -> None:
        self.deadline = time.monotonic() + self.server.limits.timeout
        try:
            super().handle_one_request()
        except HttpError as exc:
            self.refuse(exc)
        except TimeoutError:
            self.refuse(HttpError(408, "request timed out", close=True))
        except (ConnectionError, OSError):
            self.close_connection = True

    # ------------------------------------------------------------ requests
    def authorize(self) -> None:
        """Raise 401 unless the request carries the configured token."""
        token = self.server.limits.token
        if token is None:
            return
        given = self.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            msg = "missing or wrong bearer token (Authorization: Bearer ...)"
            raise HttpError(401, msg)

    def read_body(self) -> bytes:
        """The request body, de-chunked and gunzipped, within the limits."""
        limits = self.server.limits
        self.deadline = time.monotonic() + limits.body_timeout
        try:
            raw = self._framed(limits, self.deadline)
        except TimeoutError:
            raise HttpError(408, "request body timed out", close=True) from None
        finally:
            # (The answer's writes get the whole per-read timeout again.)
            self.connection.settimeout(limits.timeout)
        encoding = (self.headers.get("Content-Encoding") or "identity").strip().lower()
        if encoding == "gzip":
            return _gunzip(raw, limits.max_body)
        if encoding != "identity":
            msg = f"unsupported Content-Encoding {encoding!r}; use gzip or none"
            raise HttpError(415, msg)
        return raw

    def _framed(self, limits: Limits, deadline: float) -> bytes:
        headers = self.headers
        te = headers.get("Transfer-Encoding")
        lengths = headers.get_all("Content-Length") or []
        if te is not None:
            if lengths:
                msg = "both Content-Length and Transfer-Encoding: refusing ambiguous framing"
                raise HttpError(400, msg, close=True)
            if te.strip().lower() != "chunked":
                msg = f"unsupported Transfer-Encoding {te!r}; use chunked"
                raise HttpError(400, msg, close=True)
            return self._chunked(limits.max_body, deadline)
        return self._sized(lengths, limits.max_body, deadline)

    def _sized(self, lengths: list[str], limit: int, deadline: float) -> bytes:
        if not lengths:
            return b""
        if len(set(lengths)) != 1 or not lengths[0].strip().isdigit():
            msg = f"bad Content-Length {', '.join(lengths)!r}: expected one non-negative decimal"
            raise HttpError(400, msg, close=True)
        length = int(lengths[0])
        if length > limit:
            msg = f"body of {length} bytes is over the limit of {limit}"
            raise HttpError(413, msg, close=True)
        return self._exactly(length, deadline)

    def _exactly(self, n: int, deadline: float, into: bytearray | None = None) -> bytes:
        """``n`` body bytes, appended to ``into`` when given (a chunked body:
        one buffer, not an object per chunk, which cost ~70 bytes each)."""
        out = bytearray() if into is None else into
        left = n
        while left:
            if time.monotonic() > deadline:
                raise HttpError(408, "request body timed out", close=True)
            part = self.rfile.read1(min(left, _READ))
            if not part:
                msg = f"connection closed {left} bytes short of the body"
                raise HttpError(400, msg, close=True)
            out += part
            left -= len(part)
        return b"" if into is not None else bytes(out)

    def _chunked(self, limit: int, deadline: float) -> bytes:
        body = bytearray()
        total = 0
        while True:
            line = self.rfile.readline(_CHUNK_LINE + 1)
            size_text = line.split(b";", 1)[0].strip()
            if len(line) > _CHUNK_LINE or not line.endswith(b"\n"):
                raise HttpError(400, "bad chunk-size line", close=True)
            try:
                size = int(size_text, 16)
            except ValueError:
                msg = f"bad chunk size {size_text[:40]!r}"
                raise HttpError(400, msg, close=True) from None
            if size < 0 or size_text.startswith((b"-", b"+")):
                raise HttpError(400, "negative chunk size", close=True)
            if size == 0:
                break
            total += size
            if total > limit:
                msg = f"chunked body over the limit of {limit} bytes"
                raise HttpError(413, msg, close=True)
            self._exactly(size, deadline, body)
            if self.rfile.readline(3) not in (b"\r\n", b"\n"):
                raise HttpError(400, "chunk not followed by CRLF", close=True)
        for _ in range(100):  # trailers, up to the blank line
            trailer = self.rfile.readline(_CHUNK_LINE + 1)
            if trailer in (b"\r\n", b"\n"):
                return bytes(body)
            if not trailer or len(trailer) > _CHUNK_LINE:
                break
        raise HttpError(400, "bad chunked trailer", close=True)

    # ------------------------------------------------------------ answers
    def reply(
        self,
        status: int,
        body: bytes,
        *,
        content_type: str = "text/plain",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def refused(self, exc: HttpError) -> None:
        """Note a refused request: reported, and its connection closed when
        the rest of it is unread (whatever the answer is)."""
        if exc.close:
            self.close_connection = True
        self.server.report(
            "http_request_refused",
            {"status": exc.status, "reason": exc.message, "path": self.path},
        )

    def refuse(self, exc: HttpError) -> None:
        """Answer a refused request (best effort: the peer may be gone)."""
        self.refused(exc)
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        try:
            self.reply(exc.status, f"{exc.message}\n".encode(), headers=headers)
            if exc.status == 413 and exc.close:
                self._linger()
        except OSError:
            self.close_connection = True

    def _linger(self) -> None:
        """Read and drop what the peer still sends of a refused body, for a
        bounded time and size, after the answer: closing a socket with
        unread data makes the kernel send a reset, which throws away the
        413 before the client, still uploading, has read it (EPIPE)."""
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_WR)
        end = time.monotonic() + min(self.server.limits.timeout, LINGER_SECONDS)
        left = LINGER_BYTES
        while left > 0:
            wait = end - time.monotonic()
            if wait <= 0:
                return
            self.connection.settimeout(wait)
            try:
                got = self.connection.recv(min(left, 65536))
            except OSError:
                return
            if not got:
                return
            left -= len(got)

    def handle_expect_100(self) -> bool:
        """``Expect: 100-continue`` with a body over the limit: the 413 at
        once, so the client never uploads it."""
        length = (self.headers.get("Content-Length") or "").strip()
        if length.isdigit() and int(length) > self.server.limits.max_body:
            limit = self.server.limits.max_body
            msg = f"body of {length} bytes is over the limit of {limit}"
            self.close_connection = True
            self.refused(HttpError(413, msg, close=True))
            self.reply(413, f"{msg}\n".encode())
            return False
        return super().handle_expect_100()


def _gunzip(raw: bytes, limit: int) -> bytes:
    """Decompress at most ``limit`` bytes; a bigger result is 413, not inflated.

    Every member is read (RFC 1952: a gzip file may be several, as
    concatenating gzip files makes); bytes after the last member that are
    not one (zero padding aside) are a 400, not silently dropped."""
    out: list[bytes] = []
    total = 0
    rest = raw
    while True:
        z = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            part = z.decompress(rest, limit + 1 - total)
        except zlib.error as exc:
            msg = f"bad gzip body: {exc}"
            raise HttpError(400, msg) from None
        total += len(part)
        out.append(part)
        if total > limit or z.unconsumed_tail:
            msg = f"gzip body inflates past the limit of {limit} bytes"
            raise HttpError(413, msg)
        if not z.eof:
            raise HttpError(400, "truncated gzip body")
        rest = z.unused_data
        if not rest.strip(b"\0"):
            return b"".join(out)


def bind_error(option: str, host: str, port: int, exc: OSError) -> BindError:
    """A listening address that could not be bound, with the fix."""
    import errno

    why = exc.strerror or str(exc)
    if exc.errno == errno.EADDRINUSE:
        fix = f"the port is in use (another trajgrade?); stop what holds it, or pick another port for {option} (0: any free port)"
    elif exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
        fix = (
            f"{why}: {host} is not an address of this host; check the host of {option}"
        )
    elif exc.errno == errno.EACCES:
        fix = f"{why}: ports below 1024 need privileges; pick another port for {option}"
    else:
        fix = f"{why}; check {option}"
    return BindError(f"cannot listen on {host}:{port} ({option}): {fix}")
