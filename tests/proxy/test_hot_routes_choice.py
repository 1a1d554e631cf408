"""Which requests take the toggle routes' shorter way through Sanic (flagproxy/http/hot_routes.py): a question
about the app object an embedding program holds, so it is asked of create_app's app in this process. Over
HTTP the two ways answer the same bytes (tests/http/test_hot_routes.py proves that against real processes),
so which one answered cannot be seen from outside: these checks are what catches every request quietly going
Sanic's way (slower, still correct), or an embedder's middleware being skipped."""

from __future__ import annotations

import asyncio

from sanic import Sanic

from flagproxy.http import hot_routes, request
from flagproxy.proxy import create_app

KEY = "proxy-secret"


def _resolved(app: Sanic) -> set[tuple[str, str]]:
    """What the first request finds: the routes and signals are final once the app has started."""

    async def started() -> set[tuple[str, str]]:
        app.router.finalize()
        app.signal_router.finalize()
        app.finalize_middleware()
        return set(app.ctx.hot_routes._resolve())

    return asyncio.run(started())


ENV = {"SERVICE_URL": "http://127.0.0.1:9/api", "SERVICE_API_TOKEN": "t", "SERVICE_PROXY_CLIENT_KEYS": KEY}


def test_the_installed_sanic_builds_requests_without_repacking_its_keywords():
    assert request._FITS  # else flagproxy/http/request.py passes *args/**kwargs through (slower)


def test_the_toggle_routes_are_the_hot_ones():
    assert hot_routes._SANIC_FITS  # else every request would quietly go Sanic's way
    app = create_app(env=ENV, log_warnings=False)
    assert _resolved(app) == {(m, p) for m in ("GET", "POST") for p in ("/proxy", "/proxy/all")}


def test_middleware_or_http_signals_send_every_request_sanic_s_way():
    with_middleware = create_app(env=ENV, log_warnings=False)
    with_middleware.register_middleware(lambda request: None, "request")
    assert _resolved(with_middleware) == set()
    with_signal = create_app(env=ENV, log_warnings=False)
    with_signal.signal("http.lifecycle.request")(lambda **_: None)
    assert _resolved(with_signal) == set()
