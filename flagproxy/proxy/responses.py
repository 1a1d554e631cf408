"""Response bodies and headers the proxy sends, byte for byte as the Node proxy sends them.

Fixed bodies (503, 401, 501, `ok`, `OK`) and their ETags are computed once at import.
"""

from __future__ import annotations

import html

from flagproxy.proxy.etag import weak_etag

JSON = "application/json; charset=utf-8"
HTML = "text/html; charset=utf-8"
TEXT = "text/plain; charset=utf-8"
CACHE_CONTROL = "public, max-age=2"
KEEP_ALIVE = "timeout=5"

NOT_READY = b"The Unleash Proxy has not connected to the Unleash API and is not ready to accept requests yet."
UNAUTHORIZED = b"Unauthorized"
ALL_DISABLED = (
    b"The /proxy/all endpoint is disabled. Please check your server configuration. To enable it, set the "
    b"`enableAllEndpoint` configuration option or `ENABLE_ALL_ENDPOINT` environment variable to `true`."
)
HEALTH_OK = b"ok"
ACCEPTED = b"OK"

ETAGS = {body: weak_etag(body) for body in (NOT_READY, UNAUTHORIZED, ALL_DISABLED, HEALTH_OK, ACCEPTED)}


def not_found_page(method: str, path: str) -> bytes:
    """Express's default 404 page (`Cannot GET /x`)."""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>Error</title>\n'
        f"</head>\n<body>\n<pre>Cannot {html.escape(method)} {html.escape(path)}</pre>\n</body>\n</html>\n"
    ).encode()


NOT_FOUND_HEADERS = {"Content-Security-Policy": "default-src 'none'", "X-Content-Type-Options": "nosniff"}


def whoops(message: str) -> dict[str, str]:
    return {"error": f"Whoops! We dropped the ball on this one (an unexpected error occurred): {message}"}
