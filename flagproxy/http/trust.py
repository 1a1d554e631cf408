"""Trusted proxies and the client address for the context: the socket address, or through
X-Forwarded-For from the peers trusted to set it (TRUST_PROXY / PROXY_TRUSTED_SERVERS).

Same walk as Express's proxy-addr: start at the socket peer; while the current hop is trusted and an
X-Forwarded-For entry remains, step one entry to the left; the address reached is the client. With
`trustProxy=true` that is the leftmost entry.

The scheme follows Express's `req.protocol`: the connection's own (https over TLS, else http) unless the
socket peer is trusted, then the first X-Forwarded-Proto entry. One rule for the proxy, edge and server.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any


@dataclass(frozen=True)
class TrustProxy:
    """Which peers may set X-Forwarded-For: everyone (`trust_all`), or those in `networks`."""

    trust_all: bool = False
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()

    @property
    def enabled(self) -> bool:
        return self.trust_all or bool(self.networks)

    def trusts(self, address: str) -> bool:
        if self.trust_all:
            return True
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped  # ::ffff:10.1.2.3 is trusted by 10.0.0.0/8, as in Express's proxy-addr
        return any(ip.version == net.version and ip in net for net in self.networks)


def client_address(socket_address: str, forwarded_for: str | None, trust: TrustProxy) -> str:
    if not forwarded_for or not trust.enabled:
        return socket_address
    hops = [hop.strip() for hop in forwarded_for.split(",") if hop.strip()]
    address = socket_address
    while hops and trust.trusts(address):
        address = hops.pop()
    return address


def remote_address_of(trust: TrustProxy) -> Callable[[Any], str]:
    """request → the client's address under `trust`: the socket peer (read by C, no Python frame per
    request) when no proxy is trusted, else the X-Forwarded-For hop `client_address` leads to."""
    if not trust.enabled:
        return attrgetter("ip")

    def through_proxies(request: Any) -> str:
        return client_address(request.ip, request.headers.get("x-forwarded-for"), trust)

    return through_proxies


def client_scheme(
    socket_scheme: str, socket_address: str, forwarded_proto: str | None, trust: TrustProxy
) -> str:
    if not forwarded_proto or not trust.trusts(socket_address):
        return socket_scheme
    return forwarded_proto.split(",")[0].strip().lower() or socket_scheme


def scheme_of(trust: TrustProxy) -> Callable[[Any], str]:
    """request → the scheme the client used under `trust` (Express's `req.protocol`). Reads the
    connection itself, never Sanic's own proxy settings (PROXIES_COUNT, FORWARDED_SECRET): a second rule."""

    def scheme(request: Any) -> str:
        own = "https" if request.conn_info is not None and request.conn_info.ssl else "http"
        return client_scheme(own, request.ip, request.headers.get("x-forwarded-proto"), trust)

    return scheme
