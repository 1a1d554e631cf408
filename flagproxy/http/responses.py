"""Response bodies and headers the proxy sends, byte for byte as the Node proxy sends them.

Fixed bodies (503, 401, 501, `ok`, `OK`) and their ETags are computed once at import. Toggle answers go out
as PreparedResponse: their headers are encoded once per app (or per cached answer), not once per request.
"""

from __future__ import annotations

import html
import time
from collections.abc import Iterator, Mapping
from email.utils import formatdate
from time import monotonic as current_time  # the clock Sanic's protocols keep `_time` by
from typing import Any, cast

from sanic import HTTPResponse
from sanic.compat import Header
from sanic.exceptions import RequestCancelled
from sanic.http import Http, Stage

from flagproxy.http.etag import weak_etag

EncodedHeaders = tuple[tuple[bytes, bytes], ...]

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


def encode_headers(headers: Mapping[str, str]) -> EncodedHeaders:
    """Headers as Sanic writes them: control characters stripped (no header injection), then bytes."""
    sanitize = HTTPResponse._sanitize_header_value
    return tuple(
        (sanitize(name).encode("ascii"), sanitize(value).encode(errors="surrogateescape"))
        for name, value in headers.items()
    )


_date_second = 0
_date_value = b""


def http_date() -> bytes:
    """The Date header (RFC 9110; the Node proxy sends it on every response), formatted once a second."""
    global _date_second, _date_value
    now = int(time.time())
    if now != _date_second:
        _date_value = formatdate(now, usegmt=True).encode("ascii")
        _date_second = now
    return _date_value


class DatedResponse(HTTPResponse):
    """Sanic's HTTPResponse with a Date header, for every answer that is not a PreparedResponse. An answer
    without a content type has no Content-Type header (Sanic 25.12 writes `content-type: None` on a 200 or
    202 without a body)."""

    __slots__ = ()

    @property
    def processed_headers(self) -> Iterator[tuple[bytes, bytes]]:
        yield b"Date", http_date()
        untyped = self.content_type is None and "content-type" not in self.headers
        for name, value in super().processed_headers:
            if not (untyped and name == b"content-type"):
                yield name, value


class PreparedResponse(HTTPResponse):
    """A response whose own headers are already encoded.

    Sanic builds a header multidict for every HTTPResponse and sanitizes and encodes each name and value on
    every send; for the toggle routes that was about a tenth of a worker's time. Here the caller hands over
    the encoded headers (built once per app and per cached answer) and Sanic's HTTP layer adds only what it
    adds to every response (content-length, connection).

    A 200 sent whole on an HTTP/1.1 connection (the hot routes' answer) skips Sanic's response path as
    well: `send` writes the status line, the headers (`block`: the prepared ones already joined, when the
    caller has them so), content-length, connection and the body in one write, the bytes Sanic's
    `Http.http1_response_header` writes for it (tests/http compare whole answers byte for byte), without
    its header multidict, its formatting loop and its checks for cases that cannot arise here. Anything
    else (a HEAD, a 304, `Expect: 100-continue`, the access log on, streaming) goes Sanic's way.
    """

    __slots__ = ("block", "prepared")

    def __init__(
        self, body: bytes, prepared: EncodedHeaders, status: int = 200, block: bytes | None = None
    ) -> None:
        # HTTPResponse.__init__ would build the multidict from a dict; start from an empty one instead.
        self.asgi = False
        self.body = body
        self.content_type = None  # Content-Type, when there is a body, is among the prepared headers
        self.stream = None
        self.status = status
        self.headers = Header()
        self._cookies = None
        self.prepared = prepared
        self.block = block

    @property
    def processed_headers(self) -> Iterator[tuple[bytes, bytes]]:
        added = self.headers  # Sanic's own values: numbers and fixed words
        own = ((b"Date", http_date()), *self.prepared)
        if not added:
            return iter(own)
        return iter(own + tuple((n.encode("ascii"), f"{v}".encode("ascii")) for n, v in added.items()))

    async def send(self, data: Any = None, end_stream: bool | None = None) -> None:
        stream = self.stream
        if (
            _SANIC_FITS
            and data is None
            and self.status == 200
            and type(stream) is Http
            and stream.stage is Stage.HANDLER
            and stream.response is self
            and not stream.head_only
            and not stream.expecting_continue
            and not stream.protocol.access_log
            and not self.headers
        ):
            body = cast(bytes, self.body)  # always bytes here (__init__); Sanic's type allows None
            block = self.block
            if block is None:
                block = b"".join(b"%b: %b\r\n" % header for header in self.prepared)
            ending = _KEEP_ALIVE_END if stream.keep_alive else _CLOSE_END
            stream.response_func = None
            stream.response_size = len(body)
            stream.stage = Stage.IDLE
            length = b"content-length: %d" % len(body)
            head = b"".join((_OK_DATE, http_date(), b"\r\n", block, length, ending))
            if len(body) >= GATHER_BYTES and _writes_plainly(stream.protocol):
                # A large answer (thousands of flags) goes out beside its head in one writev, not copied
                # after it: at 5000 flags that copy (245 kB) was a quarter of a request's instructions
                # (benchmarks/README.md). What Sanic's protocol.send does is done here too: backpressure
                # first, a closing transport cancels, the idle clock is set.
                protocol = stream.protocol
                if not protocol._can_write.is_set():
                    await protocol._can_write.wait()
                transport = protocol.transport
                if transport is None or transport.is_closing():
                    raise RequestCancelled
                transport.writelines((head, body))
                protocol._time = current_time()
                return
            # One join: one allocation, no intermediate bytes objects (a chain of + made five).
            await stream._send(head + body)
            return
        await super().send(data, end_stream)


_OK_DATE = b"HTTP/1.1 200 OK\r\nDate: "
# From this size on an answer's head and body go out in one writev instead of one joined copy; below it the
# copy costs less than a second buffer does (a 350-flag answer is about 17 kB).
GATHER_BYTES = 32 * 1024


def _writes_plainly(protocol: Any) -> bool:
    """Whether `protocol.send` would only write: no `http.lifecycle.send` signal handler (Sanic dispatches
    that signal on every send). Looked up once per app: its signals are final once it serves."""
    app = protocol.app
    plain = getattr(app.ctx, "flagproxy_plain_send", None)
    if plain is None:
        plain = app.ctx.flagproxy_plain_send = (
            not any(route.name == "http.lifecycle.send" for route in app.signal_router.routes)
            and hasattr(protocol, "_can_write")
            and hasattr(protocol, "_time")
        )
    return plain


# The one-write path sets Sanic's own connection state (sanic.http.Http, whose slots are these) as its
# http1_response_header does. pyproject allows any Sanic from 25.3 on: a release that renames or drops one of
# them sends every answer Sanic's way instead of failing requests.
_SANIC_FITS = {
    "_send", "protocol", "stage", "keep_alive", "head_only", "expecting_continue",
    "response", "response_func", "response_size",
} <= set(getattr(Http, "__slots__", ())) and {"HANDLER", "IDLE"} <= set(Stage.__members__)  # fmt: skip
_KEEP_ALIVE_END = b"\r\nconnection: keep-alive\r\n\r\n"
_CLOSE_END = b"\r\nconnection: close\r\n\r\n"


def header_block(headers: EncodedHeaders) -> bytes:
    """Encoded headers as they go on the wire, for PreparedResponse's `block`."""
    return b"".join(b"%b: %b\r\n" % header for header in headers)
