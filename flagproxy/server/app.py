"""The app factory: the one place where the server is put together."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sanic import Sanic
from sanic.config import Config
from sanic_ext import Extend

from flagproxy import __version__
from flagproxy.http.request import Request
from flagproxy.http.serving import guard_worker_signals
from flagproxy.http.trust import remote_address_of, scheme_of
from flagproxy.server.auth import authenticate
from flagproxy.server.auto_methods import add_head_and_options
from flagproxy.server.client_features import PayloadCache
from flagproxy.server.console import blueprints as console_blueprints
from flagproxy.server.console.render import use_console_templates
from flagproxy.server.delta.feed import DeltaFeed
from flagproxy.server.errors import install_error_handlers
from flagproxy.server.frontend_snapshots import FrontendSnapshots
from flagproxy.server.identity.permissions import ROUTE_NEEDS
from flagproxy.server.logs import configure_logging
from flagproxy.server.openapi_page import page_file
from flagproxy.server.routes import blueprints
from flagproxy.server.series import ServerSeries
from flagproxy.server.settings import ServerSettings
from flagproxy.server.startup import open_and_prepare
from flagproxy.server.storage.database import Database


@dataclass
class ServerContext:
    settings: ServerSettings
    db: Database = field(init=False)
    payloads: PayloadCache = field(default_factory=PayloadCache)
    hydrations: PayloadCache = field(default_factory=PayloadCache)  # delta hydrations, per query
    delta_feed: DeltaFeed | None = None  # new delta events for this process's streams (DELTA_API)
    frontend: FrontendSnapshots = field(default_factory=FrontendSnapshots)
    series: ServerSeries = field(default_factory=ServerSeries)  # /internal-backstage/prometheus
    # request → the client's address / scheme under TRUST_PROXY (the proxy's and edge's rule, never Sanic's)
    remote_address: Callable[[Any], str] = field(init=False)
    scheme: Callable[[Any], str] = field(init=False)

    def __post_init__(self) -> None:
        self.remote_address = remote_address_of(self.settings.trust_proxy)
        self.scheme = scheme_of(self.settings.trust_proxy)


ServerApp = Sanic[Config, ServerContext]


class ServerRequest(Request):
    """The server's request: `client_ip`, the host Sanic's access log writes, is the TRUST_PROXY address."""

    __slots__ = ()

    @property
    def client_ip(self) -> str:
        return self.app.ctx.remote_address(self)  # type: ignore[no-any-return]


def admin_routes(app: Sanic) -> list[tuple[str, str, str]]:
    """(method, path, route name without the app's) of every route under /api/admin."""
    found = []
    for route in app.router.routes:
        path = "/" + route.path
        if path == "/api/admin" or path.startswith("/api/admin/"):
            name = route.name.split(".", 1)[1] if "." in route.name else route.name
            found += [(method, path, name) for method in sorted(route.methods)]
    return found


def _check_every_admin_route_has_a_permission(app: Sanic) -> None:
    """A route that changes something must say which permission it needs (identity/permissions.py)."""
    missing = [
        f"{method} {path} ({name})"
        for method, path, name in admin_routes(app)
        if method not in ("GET", "HEAD", "OPTIONS") and name not in ROUTE_NEEDS
    ]
    if missing:
        raise RuntimeError("admin routes without a permission in ROUTE_NEEDS: " + ", ".join(missing))


def create_app(
    settings: ServerSettings, name: str = "flagproxy-server", series_directory: str | None = None
) -> ServerApp:
    """`series_directory`: the Prometheus folder the server's workers share (none: a private one)."""
    context = ServerContext(settings, series=ServerSeries(series_directory))
    app: ServerApp = Sanic(name, ctx=context, request_class=ServerRequest)
    app.config.REQUEST_MAX_SIZE = settings.max_request_size
    app.config.KEEP_ALIVE_TIMEOUT = 5
    app.config.FALLBACK_ERROR_FORMAT = "json"
    # sanic-ext: the document at /docs/openapi.json; its Redoc and Swagger pages load scripts from a CDN,
    # so the Redoc slot serves our self-contained page instead, at /docs/openapi and /docs.
    app.config.OAS_URL_PREFIX = "/docs"
    app.config.OAS_URI_TO_JSON = "/openapi.json"
    app.config.OAS_UI_REDOC = True
    app.config.OAS_URI_TO_REDOC = "/openapi"
    app.config.OAS_PATH_TO_REDOC_HTML = page_file()
    app.config.OAS_UI_DEFAULT = "redoc"
    app.config.OAS_UI_SWAGGER = False
    app.config.CORS = False
    Extend(app)
    use_console_templates(app.ext.environment)  # console pages: Jinja2 through sanic-ext's templating
    app.ext.openapi.describe(
        "flagproxy server",
        version=__version__,
        description="Unleash-compatible admin API (authoring, tokens) and client API (what proxies and "
        "server SDKs read). Send an API token in the Authorization header.",
    )
    app.ext.openapi.secured("apiKey")
    app.ext.openapi.add_security_scheme("apiKey", "apiKey", location="header", name="Authorization")

    install_error_handlers(app)
    guard_worker_signals(app)
    app.register_middleware(authenticate, "request")
    for blueprint in [*blueprints(), *console_blueprints()]:
        app.blueprint(blueprint)
    _check_every_admin_route_has_a_permission(app)
    add_head_and_options(app)

    @app.before_server_start
    async def open_database(app: ServerApp) -> None:
        app.ctx.series.start()
        app.ctx.db = open_and_prepare(settings)
        if settings.delta_api:
            app.ctx.delta_feed = DeltaFeed(app.ctx.db, settings.max_streams)
            app.ctx.delta_feed.start()

    @app.before_server_stop
    async def end_streams(app: ServerApp) -> None:
        # Open streams end now rather than hold the graceful stop; their clients reconnect elsewhere.
        if app.ctx.delta_feed is not None:
            await app.ctx.delta_feed.stop()

    @app.after_server_stop
    async def close_database(app: ServerApp) -> None:
        app.ctx.db.close()
        await app.ctx.series.stop()

    if os.environ.get("SANIC_WORKER_IDENTIFIER"):
        # A worker process built its own app (and Sanic's default logging) from the factory: set the level
        # now, before Sanic logs "Starting worker" (info) ahead of before_server_start.
        configure_logging(settings.log_level)
    return app
