"""The hot routes' answer: 200 with the body and its ETag, or 304 when a GET/HEAD's If-None-Match has
the ETag, as Express's `fresh` decides it for the Node proxy: a weak comparison, lists and `*`, and never
when the request says `Cache-Control: no-cache` (the client wants the body, whatever it holds). The 200
carries `Cache-control: public, max-age=2`, `Vary` and the CORS headers; the 304 keeps them but `Vary`
and `Content-Type`, with an empty body.

Headers are encoded once per app when CORS does not depend on the request's Origin (PreparedResponse,
flagproxy/http/responses.py): building Sanic's header map per request cost a tenth of a worker.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sanic import HTTPResponse

from flagproxy.http import responses as r
from flagproxy.http.cors import CorsPolicy
from flagproxy.http.etag import none_match

Answer = Callable[[Any, bytes, str, bool], HTTPResponse]


def vary(cors: dict[str, str]) -> str:
    """The Vary header of a JSON answer: CORS's (Origin), then compression's Accept-Encoding."""
    cors_vary = cors.get("Vary")
    return f"{cors_vary}, Accept-Encoding" if cors_vary else "Accept-Encoding"


def no_cache(request: Any) -> bool:
    cache_control = request.headers.get("cache-control")
    return cache_control is not None and "no-cache" in cache_control


def make_answer(cors: CorsPolicy) -> Answer:
    """`answer(request, body, etag, conditional)`: 200, or (`conditional`: GET and HEAD) 304."""

    def encoded(headers: dict[str, str]) -> tuple[r.EncodedHeaders, bytes, r.EncodedHeaders]:
        ok = {**headers, "Cache-control": r.CACHE_CONTROL, "Vary": vary(headers), "Keep-Alive": r.KEEP_ALIVE}
        not_modified = {**headers, "Cache-control": r.CACHE_CONTROL, "Keep-Alive": r.KEEP_ALIVE}
        ok_headers = r.encode_headers({**ok, "Content-Type": r.JSON})
        return ok_headers, r.header_block(ok_headers), r.encode_headers(not_modified)

    fixed = encoded(cors.actual(None)) if cors.origin_list is None else None

    def answer(request: Any, body: bytes, etag: str, conditional: bool) -> HTTPResponse:
        ok, ok_block, not_modified = fixed or encoded(cors.actual(request.headers.get("origin")))
        etag_bytes = etag.encode("ascii")
        etag_header = (b"ETag", etag_bytes)
        if conditional:
            if_none_match = request.headers.get("if-none-match")
            if if_none_match and none_match(if_none_match, etag) and not no_cache(request):
                return r.PreparedResponse(b"", (*not_modified, etag_header), 304)
        return r.PreparedResponse(body, (*ok, etag_header), 200, ok_block + b"ETag: " + etag_bytes + b"\r\n")

    return answer
