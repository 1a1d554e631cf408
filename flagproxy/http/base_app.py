"""What every product's Sanic app shares: its configuration (request limits, keep-alive, no sanic-ext,
Flagproxy's request class) and the answers to what fails before or outside a route (a body or headers too
large, malformed HTTP, an unexpected exception).

Request limits: a body over the product's limit is a 413 (the Node proxy's body-parser takes 100 kB,
`SDK_BODY_LIMIT`); request line and headers over HEADER_LIMIT (Node's --max-http-header-size, where GET
contexts live) are a 431 with no body, as Node answers.
"""

from __future__ import annotations

from typing import Any

import orjson
from sanic import HTTPResponse, Sanic

from flagproxy.http import responses as r
from flagproxy.http.request import Request as FlagproxyRequest

SDK_BODY_LIMIT = 102400  # bytes, the Node proxy's (body-parser's) 100 kB
HEADER_LIMIT = 16384  # request line + headers, Node's --max-http-header-size: GET contexts live there
TOO_LARGE = orjson.dumps({"error": "request entity too large"})


def new_app(name: str, *, body_limit: int, access_log: bool) -> Sanic:
    """A Sanic app configured as every product's: the request class that answers a control byte in the
    request target with a 400, the limits, 5 s keep-alive, no sanic-ext machinery on the routes."""
    app = Sanic(name, configure_logging=False, request_class=FlagproxyRequest)
    app.config.AUTO_EXTEND = False  # keep sanic-ext's per-request machinery off every route
    app.config.KEEP_ALIVE_TIMEOUT = 5
    app.config.REQUEST_MAX_SIZE = body_limit
    app.config.REQUEST_MAX_HEADER_SIZE = HEADER_LIMIT
    app.config.ACCESS_LOG = access_log
    app.config.NOISY_EXCEPTIONS = False
    return app


def headers_too_large(exception: Exception) -> HTTPResponse | None:
    """Sanic's PayloadTooLarge for the request line and headers: Node's 431 with no body; None for a body
    over the limit (the product answers its 413 with its own headers, TOO_LARGE as the body)."""
    if "header" in str(exception):
        return r.DatedResponse(status=431, headers={"Connection": "close"})
    return None


def bad_http(exception: Exception) -> HTTPResponse:
    """Malformed HTTP (Sanic's BadRequest before any route): 400 with what Sanic said."""
    return r.DatedResponse(
        orjson.dumps({"error": f"Bad request: {exception}"}), status=400, content_type=r.JSON
    )


def unexpected(logger: Any, request: Any, exception: Exception) -> HTTPResponse:
    """A bug: logged, and the Node proxy's 500 body."""
    logger.error(f"Unexpected error on {request.method} {request.path}: {exception!r}")
    return r.DatedResponse(orjson.dumps(r.whoops(str(exception))), status=500, content_type=r.JSON)
