"""Weak ETags exactly as the Node proxy (Express's `etag` package) makes them, and If-None-Match.

`W/"<byte length, hex>-<first 27 chars of base64(sha1(body))>"`: identical bodies get identical ETags on
every worker and on the Node proxy itself, so caches keep working when one replaces the other. SHA-1 runs in
C through hashlib and costs a few microseconds for a typical toggle list.
"""

from __future__ import annotations

import base64
import hashlib


def weak_etag(body: bytes) -> str:
    digest = base64.b64encode(hashlib.sha1(body).digest())[:27].decode("ascii")
    return f'W/"{len(body):x}-{digest}"'


def none_match(if_none_match: str | None, etag: str) -> bool:
    """True when the request's If-None-Match matches `etag` (weak comparison, lists, `*`)."""
    if not if_none_match:
        return False
    if if_none_match.strip() == "*":
        return True
    bare = etag[2:] if etag.startswith("W/") else etag
    for candidate in if_none_match.split(","):
        candidate = candidate.strip()
        if candidate.startswith("W/"):
            candidate = candidate[2:]
        if candidate == bare:
            return True
    return False
