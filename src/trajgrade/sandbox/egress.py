"""Which hosts the sandboxed agent may reach: :class:`Egress`.

The allow-list is the policy's ``protect.network.allow`` (``*.example.com``
names the subdomains, not ``example.com`` itself) plus the agent's model API,
which is always reachable: the host of ``ANTHROPIC_BASE_URL``,
``OPENAI_BASE_URL``, ``GOOGLE_GEMINI_BASE_URL`` or Codex's
``model_providers.*.base_url`` when set, else the vendors' public hosts.

A host is compared as a DNS name after lower-casing and dropping a final
dot. An IP literal passes only when it is listed as written: a name the
resolver would read as an address (``2130706433``, ``0x7f.1``) is not a DNS
name and is refused, so no spelling of an address reaches it by way of a
glob.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import os
import re
import tomllib
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

import msgspec

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = ("MODEL_HOSTS", "Egress", "is_ip", "model_endpoints")

#: The model API hosts of each agent when no base URL is set.
MODEL_HOSTS: Final = {
    "claude": ("api.anthropic.com",),
    "codex": ("api.openai.com", "chatgpt.com"),
    "gemini": ("generativelanguage.googleapis.com",),
}
_BASE_URLS: Final = ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "GOOGLE_GEMINI_BASE_URL")
#: Ports a listed domain may be reached on (HTTPS and plain HTTP).
WEB_PORTS: Final = frozenset({443, 80})
_LABEL: Final = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")


class Egress(msgspec.Struct, frozen=True, kw_only=True):
    """The allow-list the proxy enforces."""

    #: Domain globs from ``protect.network.allow``: reachable on
    #: :data:`WEB_PORTS`, or on the one port of a ``host:PORT`` entry.
    domains: tuple[str, ...] = ()
    #: (host, port) pairs of the model APIs, allowed exactly.
    endpoints: tuple[tuple[str, int], ...] = ()

    def refusal(self, host: str, port: int) -> str | None:
        """Why a connection to ``host:port`` is refused; None: it is allowed."""
        name = _canonical(host)
        if (name, port) in self.endpoints:
            return None
        if is_ip(name):
            return "an IP address that is not listed (only names in protect.network.allow are reachable)"
        if not _is_dns_name(name):
            return "not a DNS name"
        listed = [d for d in self.domains if _matches(name, _without_port(d))]
        if not listed:
            return "not in protect.network.allow"
        if not any(port in _ports(d) for d in listed):
            return (
                f"port {port} (a listed domain is reachable on 443 and 80, "
                "or on the port it is listed with: host:PORT)"
            )
        return None


def _without_port(entry: str) -> str:
    host, colon, port = entry.rpartition(":")
    return host if colon and port.isdigit() else entry


def _ports(entry: str) -> frozenset[int]:
    _, colon, port = entry.rpartition(":")
    return frozenset({int(port)}) if colon and port.isdigit() else WEB_PORTS


def _canonical(host: str) -> str:
    return host.strip("[]").lower().removesuffix(".")


def is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _is_dns_name(name: str) -> bool:
    labels = name.split(".")
    # An all-numeric last label is how inet_aton spells an address (0x7f.1, 2130706433).
    return (
        0 < len(name) <= 253
        and all(_LABEL.fullmatch(label) for label in labels)
        and not labels[-1].isdigit()
        and not labels[-1].startswith("0x")
    )


def _matches(name: str, pattern: str) -> bool:
    pattern = _canonical(pattern)
    if pattern.startswith("*."):
        # A subdomain glob: a.example.com and a.b.example.com, never example.com.
        return name.endswith(pattern[1:]) and fnmatch.fnmatchcase(
            name[: -len(pattern) + 1], "?*"
        )
    return fnmatch.fnmatchcase(name, pattern)


def model_endpoints(
    agent: str | None, env: Mapping[str, str], codex_home: str | None = None
) -> tuple[tuple[str, int], ...]:
    """The (host, port) pairs of the model APIs the agent talks to."""
    urls = [env[k] for k in _BASE_URLS if env.get(k)]
    if agent == "codex":
        urls += _codex_base_urls(codex_home)
    found = [e for e in map(_endpoint, urls) if e is not None]
    if not found:
        hosts: Iterable[str] = (
            MODEL_HOSTS[agent]
            if agent in MODEL_HOSTS
            else [h for hs in MODEL_HOSTS.values() for h in hs]
        )
        found = [(h, 443) for h in hosts]
    return tuple(dict.fromkeys(found))


def _endpoint(url: str) -> tuple[str, int] | None:
    try:
        parts = urlsplit(url)
        port = parts.port or (80 if parts.scheme == "http" else 443)
    except ValueError:
        return None
    return None if not parts.hostname else (_canonical(parts.hostname), port)


def _codex_base_urls(codex_home: str | None) -> list[str]:
    """``model_providers.*.base_url`` of Codex's config.toml, when readable."""
    home = codex_home or os.path.join(os.path.expanduser("~"), ".codex")
    try:
        with open(os.path.join(home, "config.toml"), "rb") as f:
            config = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError):
        return []
    providers = config.get("model_providers")
    if not isinstance(providers, dict):
        return []
    return [
        p["base_url"]
        for p in providers.values()
        if isinstance(p, dict) and isinstance(p.get("base_url"), str)
    ]
