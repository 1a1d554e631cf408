"""The Sanic request class of every app (`flagproxy proxy`, `flagproxy server`, `flagproxy edge`).

Sanic 25.12 answers a request whose target httptools refuses (a NUL or another control byte in it) by
building a stand-in request from the same target to run the error handlers; that raises BadURL again, so
the connection closed without an answer and Sanic logged a traceback for every such request. The stand-in
(method "NONE", built only for error handling) gets the target `*` instead, and the caller its 400.

Every request is built through this `__init__`: it takes Sanic's parameters by name, as Sanic's own does,
where a `*args, **kwargs` pass-through repacked Sanic's keywords into a dict per request (2.3 µs of each,
measured against Sanic's class with timeit). A Sanic release with other parameters gets the pass-through.
"""

from __future__ import annotations

import inspect
from typing import Any

from sanic import Request as SanicRequest
from sanic.exceptions import BadURL

_SANIC_PARAMETERS = (
    "self",
    "url_bytes",
    "headers",
    "version",
    "method",
    "transport",
    "app",
    "head",
    "stream_id",
)


_FITS = tuple(inspect.signature(SanicRequest.__init__).parameters) == _SANIC_PARAMETERS

if _FITS:

    class Request(SanicRequest):
        def __init__(
            self,
            url_bytes: bytes,
            headers: Any,
            version: str,
            method: str,
            transport: Any,
            app: Any,
            head: bytes = b"",
            stream_id: int = 0,
        ) -> None:
            try:
                super().__init__(url_bytes, headers, version, method, transport, app, head, stream_id)
            except BadURL:
                if method != "NONE":
                    raise
                super().__init__(b"*", headers, version, method, transport, app, head, stream_id)

else:

    class Request(SanicRequest):  # type: ignore[no-redef]
        def __init__(self, url_bytes: bytes, *args: Any, **kwargs: Any) -> None:
            try:
                super().__init__(url_bytes, *args, **kwargs)
            except BadURL:
                if kwargs.get("method") != "NONE":
                    raise
                super().__init__(b"*", *args, **kwargs)
