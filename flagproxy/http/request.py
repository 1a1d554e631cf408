"""The Sanic request class of every app (`flagproxy proxy`, `flagproxy server`, `flagproxy edge`).

Sanic 25.12 answers a request whose target httptools refuses (a NUL or another control byte in it) by
building a stand-in request from the same target to run the error handlers; that raises BadURL again, so
the connection closed without an answer and Sanic logged a traceback for every such request. The stand-in
(method "NONE", built only for error handling) gets the target `*` instead, and the caller its 400.
"""

from __future__ import annotations

from typing import Any

from sanic import Request as SanicRequest
from sanic.exceptions import BadURL


class Request(SanicRequest):
    def __init__(self, url_bytes: bytes, *args: Any, **kwargs: Any) -> None:
        try:
            super().__init__(url_bytes, *args, **kwargs)
        except BadURL:
            if kwargs.get("method") != "NONE":
                raise
            super().__init__(b"*", *args, **kwargs)
