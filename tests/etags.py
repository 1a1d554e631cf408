"""The Node proxy's ETags, kept as the proof that our bodies are the Node proxy's bytes.

Our proxy's ETags are XXH3-128 (flagproxy/http/etag.py), but the ETags recorded from the Node proxy
(proxy-transcripts.md, proxy-behaviour.md) are Express's: `W/"<length hex>-<first 27 chars of
base64(sha1(body))>"`. Recomputing Express's ETag over the body we received and comparing it with the
recorded one proves the body is byte for byte the Node proxy's; comparing our header with `xxh3_etag` of the
same bytes proves the header describes exactly what was sent.

Both are written here from the algorithms' public definitions, not taken from flagproxy/http/etag.py: the
HTTP tests check the header the proxy sends against them, and tests/proxy/test_http_parts.py pins them to
fixed values (Express's recorded by the Node proxy, XXH3's from xxHash's own test vector).
"""

from __future__ import annotations

import base64
import hashlib

import xxhash


def express_etag(body: bytes) -> str:
    """Express's default weak ETag (the `etag` package, 1.8.1), as the Node proxy sends it."""
    digest = base64.b64encode(hashlib.sha1(body).digest())[:27].decode("ascii")
    return f'W/"{len(body):x}-{digest}"'


def xxh3_etag(body: bytes) -> str:
    """The documented form of our ETags (docs/proxy.md): `W/"<length hex>-<base64 of XXH3-128, no padding>"`,
    the digest in xxHash's canonical (big-endian) byte order."""
    digest = bytes.fromhex(xxhash.xxh3_128_hexdigest(body))
    return f'W/"{len(body):x}-{base64.b64encode(digest).decode("ascii").rstrip("=")}"'


def assert_node_body(headers: dict[str, str], body: bytes, node_etag: str) -> None:
    """(a) `body` is the Node proxy's answer, byte for byte: Express's ETag of it is the one Node sent;
    (b) our ETag header is our algorithm over exactly those bytes."""
    ours = express_etag(body)
    assert ours == node_etag, (
        f"not the Node proxy's bytes: Express's ETag {ours}, Node's {node_etag}: {body!r:.300}"
    )
    assert headers["etag"] == xxh3_etag(body), f"ETag {headers['etag']} is not XXH3's of the body sent"
