"""The egress proxy, served for real on a Unix socket, in front of a real
loopback HTTP server: listed names go through (to the address resolved
once), everything else is 403 and reported."""

from __future__ import annotations

import http.server
import ipaddress
import socket
import threading
from typing import TYPE_CHECKING

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trajgrade.sandbox.egress import Egress, model_endpoints
from trajgrade.sandbox.proxy import EgressProxy, Refusal

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"hello {self.path} host={self.headers['Host']}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def origin() -> Iterator[int]:
    """A real HTTP server on loopback; its port."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


class Resolver:
    """Maps names used only by these tests; counts lookups."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        if host not in self.table:
            raise OSError(f"{host}: no such name")
        return self.table[host]


def exchange(
    tmp_path: Path, egress: Egress, request: bytes, resolver: Resolver
) -> tuple[bytes, list[Refusal]]:
    """Send ``request`` to the proxy; what came back (to EOF) and the refusals."""
    refused: list[Refusal] = []
    path = str(tmp_path / "p.sock")

    async def main() -> bytes:
        proxy = EgressProxy(egress, on_refused=refused.append, resolver=resolver)
        listener = await anyio.create_unix_listener(path)
        async with listener, anyio.create_task_group() as tg:
            tg.start_soon(proxy.serve, listener)
            with anyio.fail_after(10):
                async with await anyio.connect_unix(path) as client:
                    await client.send(request)
                    got = b""
                    while b"\r\n\r\n" not in got or not _complete(got):
                        try:
                            got += await client.receive()
                        except anyio.EndOfStream:
                            break
            tg.cancel_scope.cancel()
        return got

    return anyio.run(main), refused


def _complete(got: bytes) -> bool:
    head, _, body = got.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return head.startswith(b"HTTP/1.1 200 Connection established")


def test_a_listed_name_goes_through_to_the_resolved_address(
    tmp_path: Path, origin: int
) -> None:
    resolver = Resolver({"allowed.test": ["127.0.0.1"]})
    egress = Egress(domains=(f"allowed.test:{origin}",))
    request = f"GET http://allowed.test:{origin}/x HTTP/1.1\r\nHost: allowed.test\r\nProxy-Connection: keep-alive\r\n\r\n"
    got, refused = exchange(tmp_path, egress, request.encode(), resolver)
    assert got.startswith(b"HTTP/1.0 200"), got
    assert got.endswith(b"hello /x host=allowed.test")
    assert refused == []
    assert resolver.asked == ["allowed.test"]


def test_connect_tunnels_to_a_listed_name(tmp_path: Path, origin: int) -> None:
    resolver = Resolver({"api.allowed.test": ["127.0.0.1"]})
    egress = Egress(domains=(f"*.allowed.test:{origin}",))
    request = (
        f"CONNECT api.allowed.test:{origin} HTTP/1.1\r\n\r\n"
        "GET /tunnelled HTTP/1.1\r\nHost: api.allowed.test\r\n\r\n"
    ).encode()
    got, refused = exchange(tmp_path, egress, request, resolver)
    assert got.startswith(b"HTTP/1.1 200 Connection established\r\n\r\n")
    tail = got.split(b"\r\n\r\n", 1)[1]
    # The tunnelled request reached the origin (its answer may follow later).
    assert refused == []
    assert resolver.asked == ["api.allowed.test"]
    assert tail == b"" or tail.startswith(b"HTTP/1.0 200")


@pytest.mark.parametrize(
    ("request_line", "host"),
    [
        ("CONNECT evil.test:443", "evil.test"),
        ("GET http://evil.test/steal", "evil.test"),
        ("CONNECT 127.0.0.1:{port}", "127.0.0.1"),
        ("CONNECT [::1]:{port}", "::1"),
        ("GET http://2130706433:{port}/", "2130706433"),
        ("GET http://0x7f.1:{port}/", "0x7f.1"),
        ("CONNECT allowed.test.evil.test:443", "allowed.test.evil.test"),
        ("CONNECT allowed.test:22", "allowed.test"),
        ("GET http://user@evil.test/", "evil.test"),
    ],
)
def test_everything_else_is_refused_and_reported(
    tmp_path: Path, origin: int, request_line: str, host: str
) -> None:
    resolver = Resolver({h: ["127.0.0.1"] for h in ("evil.test", "allowed.test")})
    egress = Egress(domains=("allowed.test",))
    line = request_line.format(port=origin)
    got, refused = exchange(
        tmp_path, egress, f"{line} HTTP/1.1\r\n\r\n".encode(), resolver
    )
    assert got.startswith(b"HTTP/1.1 403 Forbidden"), got
    assert [r.host for r in refused] == [host]
    assert resolver.asked == []  # refused before any lookup


def test_dns_rebinding_cannot_move_an_allowed_connection(
    tmp_path: Path, origin: int
) -> None:
    """The proxy looks the name up once and connects to that answer: a
    resolver that would answer differently the next time is never asked."""

    class Rebinding(Resolver):
        async def __call__(self, host: str, port: int) -> list[str]:
            self.asked.append(host)
            return ["127.0.0.1"] if len(self.asked) == 1 else ["10.255.255.1"]

    resolver = Rebinding({})
    egress = Egress(domains=(f"allowed.test:{origin}",))
    request = (
        f"GET http://allowed.test:{origin}/once HTTP/1.1\r\nHost: allowed.test\r\n\r\n"
    )
    got, _ = exchange(tmp_path, egress, request.encode(), resolver)
    assert got.endswith(b"hello /once host=allowed.test")
    assert resolver.asked == ["allowed.test"]


def test_a_model_endpoint_is_reachable_exactly(tmp_path: Path, origin: int) -> None:
    env = {"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{origin}"}
    egress = Egress(endpoints=model_endpoints("claude", env))
    request = f"GET http://127.0.0.1:{origin}/v1/messages HTTP/1.1\r\nHost: x\r\n\r\n"
    got, refused = exchange(tmp_path, egress, request.encode(), Resolver({}))
    assert got.startswith(b"HTTP/1.0 200") and refused == []
    other = (
        f"GET http://127.0.0.1:{origin + 1 if origin < 65535 else 1}/ HTTP/1.1\r\n\r\n"
    )
    got, refused = exchange(tmp_path, egress, other.encode(), Resolver({}))
    assert got.startswith(b"HTTP/1.1 403")


def test_garbage_is_a_bad_request(tmp_path: Path) -> None:
    got, refused = exchange(
        tmp_path, Egress(), b"GET /origin-form HTTP/1.1\r\n\r\n", Resolver({})
    )
    assert got.startswith(b"HTTP/1.1 400")
    assert refused == []


def test_model_hosts_by_agent() -> None:
    assert model_endpoints("claude", {}) == (("api.anthropic.com", 443),)
    assert model_endpoints("codex", {}, "/nonexistent") == (
        ("api.openai.com", 443),
        ("chatgpt.com", 443),
    )
    assert model_endpoints(
        "gemini", {"GOOGLE_GEMINI_BASE_URL": "https://g.example:8443/v1"}
    ) == (("g.example", 8443),)


def test_codex_model_providers_are_read(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        '[model_providers.local]\nname = "x"\nbase_url = "http://models.internal:8000/v1"\n'
    )
    assert model_endpoints("codex", {}, str(tmp_path)) == (("models.internal", 8000),)


_label = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True)
_name = st.lists(_label, min_size=1, max_size=4).map(".".join)


@given(_name)
def test_a_subdomain_glob_allows_exactly_the_subdomains(name: str) -> None:
    egress = Egress(domains=("*.example.com",))
    sub = f"{name}.example.com"
    assert egress.refusal(sub, 443) is None
    assert egress.refusal(sub.upper() + ".", 443) is None
    assert egress.refusal("example.com", 443) is not None
    assert egress.refusal(f"{name}example.com", 443) is not None
    assert egress.refusal(f"example.com.{name}", 443) is not None


@given(st.ip_addresses())
def test_no_ip_literal_passes_a_domain_list(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> None:
    egress = Egress(domains=("*", "*.*"))
    assert egress.refusal(str(address), 443) is not None
    assert egress.refusal(f"[{address}]", 443) is not None
    if address.version == 4:
        packed = int(address)
        assert egress.refusal(str(packed), 443) is not None
        assert egress.refusal(hex(packed), 443) is not None


def test_numeric_spellings_resolve_to_addresses_here() -> None:
    """Why numeric names are refused: the C resolver reads them as addresses."""
    assert socket.gethostbyname("2130706433") == "127.0.0.1"


def test_through_the_sandbox_a_listed_name_answers_and_others_are_refused(
    tmp_path: Path, origin: int
) -> None:
    """curl inside the real sandbox, via the forwarder and the proxy, to a
    real loopback server behind a name only the proxy's resolver knows."""
    import msgspec
    from tests.sandbox._sandbox import Box, require_bwrap

    from trajgrade.graders.protect.config import NetworkConfig

    require_bwrap()
    box = Box(tmp_path / "box", resolver=Resolver({"allowed.test": ["127.0.0.1"]}))
    listed = NetworkConfig(allow=(f"allowed.test:{origin}",))
    box.protect = msgspec.structs.replace(box.protect, network=listed)
    done = box.run(
        f"curl -sS -m 10 http://allowed.test:{origin}/in; echo; "
        f"curl -s -m 10 -o /dev/null -w '%{{http_code}}' http://evil.test:{origin}/"
    )
    assert done.stdout.splitlines() == [
        f"hello /in host=allowed.test:{origin}",
        "403",
    ], done.stderr
    assert [(r.host, r.method) for r in box.refused] == [("evil.test", "GET")]
