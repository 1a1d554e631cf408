"""A shorter way through Sanic for the toggle routes (`POST /proxy`, `GET /proxy`, edge's `/api/frontend`).

Sanic's `handle_request` runs for every request: the signals (removed by its touch-up when none are
registered), a router lookup, the body read through an async iterator over `Http.read`, the request and
response middleware, `Request.respond` and the send. For a request whose method and path are exactly one
of the hot routes', `HotRoutes.handle` (the protocol's request handler, set by StoppingHttpProtocol) does
the same steps with what can be known once: the route and its handler (the series wrapper: every request
is still counted) looked up at the first request, the body taken straight from the connection's buffer
when it has all arrived (Content-Length, no 100-continue), and the answer connected as `Request.respond`
does it without response middleware, then Sanic's (or PreparedResponse's) `send`.

Sanic still parses the request head and builds the Request (limits, keep-alive, malformed HTTP,
pipelining: all Sanic's). Anything else goes to `handle_request`: other paths and methods (HEAD,
preflights, `/proxy/`), a chunked or partly arrived body, `Expect`, and every request of an app with
middleware or `http.*` signals, for which the short way would skip something.
"""

from __future__ import annotations

from asyncio import CancelledError
from typing import Any

from sanic import Sanic
from sanic.exceptions import MethodNotAllowed, NotFound, ServerError
from sanic.http import Http
from sanic.response import BaseHTTPResponse

_NOT_RESOLVED: dict[tuple[str, str], tuple[Any, Any]] = {}
# The connection state `handle` reads and sets (sanic.http.Http's slots and its respond). pyproject allows any
# Sanic from 25.3 on: a release that renames one of them sends every request Sanic's way instead of failing.
_SANIC_FITS = all(
    hasattr(Http, name)
    for name in (
        "recv_buffer", "request_body", "request_bytes", "request_bytes_left", "request_max_size",
        "expecting_continue", "response", "respond",
    )
)  # fmt: skip


class HotRoutes:
    def __init__(self, app: Sanic[Any, Any], routes: list[tuple[str, str]]) -> None:
        self.app = app
        self.routes = routes  # (method, path) as registered: the exact path only
        self.targets = _NOT_RESOLVED
        app.ctx.hot_routes = self

    def _resolve(self) -> dict[tuple[str, str], tuple[Any, Any]]:
        """(method, path) → (route, handler), once the app has started (its router and signals are final).
        Empty, so every request goes Sanic's way, when the app has `http.*` signals or middleware."""
        app = self.app
        if not _SANIC_FITS:
            return {}
        if any(signal.name.startswith("http.") for signal in app.signal_router.routes):
            return {}
        if app.request_middleware or app.response_middleware:
            return {}
        targets = {}
        for method, path in self.routes:
            try:
                route, handler, kwargs = app.router.get(path, method, None)
            except (NotFound, MethodNotAllowed):
                continue
            # Set when the app starts (Sanic's finalize_middleware); not there, nothing is known of them.
            on_request = getattr(route.extra, "request_middleware", None)
            on_response = getattr(route.extra, "response_middleware", None)
            if kwargs or on_request is None or on_response is None or on_request or on_response:
                continue
            if hasattr(handler, "is_stream") or hasattr(handler, "is_websocket"):
                continue
            targets[(method, path)] = (route, handler)
        return targets

    async def handle(self, request: Any) -> None:
        """The protocol's request handler: Sanic's `handle_request`, shorter for a hot route."""
        targets = self.targets
        if targets is _NOT_RESOLVED:
            targets = self.targets = self._resolve()
        target = targets.get((request.method, request.path))
        stream = request.stream
        if target is None or type(stream) is not Http or stream.expecting_continue:
            await self.app.handle_request(request)
            return
        route, handler = target
        try:
            request._match_info = {}
            request.route = route
            if stream.request_body:
                buffer = stream.recv_buffer
                size = stream.request_bytes_left
                if (
                    stream.request_body is True  # Content-Length (chunked is "chunked")
                    and size == stream.request_bytes
                    and size <= stream.request_max_size
                    and len(buffer) >= size
                ):
                    # What Http.read returns for it, without its loop: the whole body is in the buffer.
                    request.body = bytes(buffer[:size])
                    del buffer[:size]
                    stream.request_bytes_left = 0
                    stream.request_body = None
                else:
                    await request.receive_body()
            response = await handler(request)
            if not isinstance(response, BaseHTTPResponse):
                raise ServerError(f"Invalid response type {response!r} (need HTTPResponse)")
            # Request.respond without response middleware (there is none): Http.respond connects it.
            if stream.response is not None:
                raise ServerError("Second respond call is not allowed.")
            stream.respond(response)
            request.responded = True
            await response.send(end_stream=True)
        except CancelledError:
            raise
        except Exception as error:
            await self.app.handle_exception(request, error, run_middleware=False)
