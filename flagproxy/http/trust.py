"""The client address for the context: the socket address, or through X-Forwarded-For with trustProxy.

Same walk as Express's proxy-addr: start at the socket peer; while the current hop is trusted and an
X-Forwarded-For entry remains, step one entry to the left; the address reached is the client. With
`trustProxy=true` that is the leftmost entry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flagproxy.proxy.settings import TrustProxy


def client_address(socket_address: str, forwarded_for: str | None, trust: TrustProxy) -> str:
    if not forwarded_for or not trust.enabled:
        return socket_address
    hops = [hop.strip() for hop in forwarded_for.split(",") if hop.strip()]
    address = socket_address
    while hops and trust.trusts(address):
        address = hops.pop()
    return address
