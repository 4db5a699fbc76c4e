"""The sandbox's only way out: an HTTP proxy that lets through the allowed hosts.

``run --sandbox`` starts the agent with no network but loopback
(``bwrap --unshare-net``). This proxy runs in the trajgrade process, outside
the sandbox, on a Unix socket that is bound into it; inside, a forwarder
(socat) turns ``127.0.0.1:PORT`` into that socket and the agent is given
``HTTPS_PROXY``/``HTTP_PROXY``/``ALL_PROXY`` for it. A program that ignores
those variables has no route at all.

It speaks the two forms proxies are sent: ``CONNECT host:port`` (HTTPS and
any tunnelled protocol) and plain HTTP with an absolute URL. Each is judged
by :class:`~trajgrade.sandbox.egress.Egress` before anything is resolved;
a refused one gets ``403`` and is reported to ``on_refused`` (the run writes
it as a guard decision). An allowed name is resolved once, here, and the
connection goes to the address that was resolved: no second lookup can be
rebound to another address.

(A maintained proxy library was looked for: those on PyPI are full
intercepting proxies or threaded servers; this needs neither, and anyio is
already a dependency.)
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final, TypeAlias

import anyio
import msgspec
from anyio.streams.buffered import BufferedByteReceiveStream

from trajgrade.sandbox.egress import is_ip

if TYPE_CHECKING:
    from anyio.abc import ByteStream, Listener

    from trajgrade.sandbox.egress import Egress

__all__ = ("EgressProxy", "Refusal", "Resolver")

#: host, port -> the addresses to connect to, in order.
Resolver: TypeAlias = Callable[[str, int], Awaitable[list[str]]]
_MAX_HEAD: Final = 64 * 1024
_HOP_HEADERS: Final = (b"proxy-connection:", b"proxy-authorization:")


class Refusal(msgspec.Struct, frozen=True, kw_only=True):
    """A connection the proxy refused."""

    host: str
    port: int
    method: str
    reason: str


class _BadRequest(Exception):
    pass


async def _resolve(host: str, port: int) -> list[str]:
    infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


class EgressProxy:
    """Serves CONNECT and plain-HTTP proxy requests, allowing only ``egress``."""

    def __init__(
        self,
        egress: Egress,
        *,
        on_refused: Callable[[Refusal], None],
        resolver: Resolver | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.egress = egress
        self.on_refused = on_refused
        self.resolve = resolver or _resolve
        self.timeout = timeout

    async def serve(self, listener: Listener[ByteStream]) -> None:
        """Serve until cancelled."""
        await listener.serve(self.handle)

    async def handle(self, client: ByteStream) -> None:
        async with client:
            reader = BufferedByteReceiveStream(client)
            try:
                with anyio.fail_after(self.timeout):
                    head = await reader.receive_until(b"\r\n\r\n", _MAX_HEAD)
                method, host, port, forward = _parse(head)
            except (anyio.EndOfStream, anyio.IncompleteRead, TimeoutError):
                return  # a probe, or a client that went away
            except (_BadRequest, anyio.DelimiterNotFound):
                await _answer(client, b"400 Bad Request", b"not a proxy request\n")
                return
            if (why := self.egress.refusal(host, port)) is not None:
                self.on_refused(
                    Refusal(host=host, port=port, method=method, reason=why)
                )
                body = f"trajgrade sandbox: {host}:{port} is refused: {why}\n"
                await _answer(client, b"403 Forbidden", body.encode())
                return
            upstream = await self._connect(host, port)
            if upstream is None:
                await _answer(client, b"502 Bad Gateway", b"cannot connect\n")
                return
            async with upstream:
                if forward is None:
                    await client.send(b"HTTP/1.1 200 Connection established\r\n\r\n")
                else:
                    await upstream.send(forward)
                await _relay(reader, client, upstream)

    async def _connect(self, host: str, port: int) -> ByteStream | None:
        try:
            with anyio.fail_after(self.timeout):
                name = host.strip("[]")
                # A listed address is used as it is; a name is resolved once.
                addresses = [name] if is_ip(name) else await self.resolve(name, port)
                for address in addresses:
                    with contextlib.suppress(OSError):
                        return await anyio.connect_tcp(address, port)
        except (OSError, TimeoutError):
            pass
        return None


def _parse(head: bytes) -> tuple[str, str, int, bytes | None]:
    """(method, host, port, the head to send upstream; None: a tunnel)."""
    line, _, rest = head.partition(b"\r\n")
    try:
        method, target, version = line.decode("ascii").split(" ")
    except (UnicodeDecodeError, ValueError):
        raise _BadRequest from None
    if method == "CONNECT":
        host, port = _host_port(target, 443)
        return method, host, port, None
    scheme, sep, after = target.partition("://")
    if not sep or scheme.lower() != "http":
        raise _BadRequest  # origin-form: not sent to a proxy
    authority, slash, path = after.partition("/")
    host, port = _host_port(authority.rpartition("@")[2], 80)
    headers = [h for h in rest.split(b"\r\n") if not h.lower().startswith(_HOP_HEADERS)]
    request = f"{method} {slash}{path} {version}".encode("ascii")
    return method, host, port, b"\r\n".join([request, *headers]) + b"\r\n\r\n"


def _host_port(authority: str, default: int) -> tuple[str, int]:
    if authority.startswith("["):
        host, _, tail = authority[1:].partition("]")
        port_text = tail.removeprefix(":")
    else:
        host, _, port_text = authority.partition(":")
    try:
        port = int(port_text) if port_text else default
    except ValueError:
        raise _BadRequest from None
    if not host or not 0 < port < 65536:
        raise _BadRequest
    return host, port


async def _answer(client: ByteStream, status: bytes, body: bytes) -> None:
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
        await client.send(
            b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n"
            b"Connection: close\r\n\r\n" + body
        )


async def _relay(
    reader: BufferedByteReceiveStream, client: ByteStream, upstream: ByteStream
) -> None:
    async def pipe(receive: Callable[[], Awaitable[bytes]], out: ByteStream) -> None:
        with contextlib.suppress(
            anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError
        ):
            while True:
                await out.send(await receive())
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await out.send_eof()

    async with anyio.create_task_group() as tg:
        tg.start_soon(pipe, reader.receive, upstream)
        tg.start_soon(pipe, upstream.receive, client)
