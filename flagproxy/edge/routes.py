"""Edge's route table: which handler answers which path, under the base path (docs/edge.md lists them);
`create_app` is the whole `flagproxy edge` app. Kept apart from the app's wiring (flagproxy/edge/app.py),
which the route modules use, so no route module and the app import each other."""

from __future__ import annotations

from sanic import Sanic

from flagproxy.edge import backstage, client_api, delta_api, frontend_api
from flagproxy.edge.app import EdgeApp
from flagproxy.edge.settings import EdgeSettings
from flagproxy.http.hot_routes import HotRoutes


def add_routes(edge: EdgeApp) -> None:

    base = edge.settings.base_path
    get, post = ["GET", "HEAD"], ["POST"]
    for family in ("frontend", "proxy"):
        root = f"{base}/api/{family}"
        edge.route(f"{root}", get, frontend_api.enabled_get(edge))
        edge.route(f"{root}", post, frontend_api.enabled_post(edge))
        edge.route(f"{root}/features/<name>", get + post, frontend_api.one_feature(edge))
        edge.route(f"{root}/client/metrics", post, frontend_api.usage(edge))
        edge.route(f"{root}/client/register", post, frontend_api.register(edge))
        if not edge.settings.disable_all_endpoint:
            edge.route(f"{root}/all", get, frontend_api.all_get(edge))
            edge.route(f"{root}/all", post, frontend_api.all_post(edge))
            edge.route(f"{root}/all/client/metrics", post, frontend_api.usage(edge))
            edge.route(f"{root}/all/client/register", post, frontend_api.register(edge))
    client = f"{base}/api/client"
    edge.route(f"{client}/features", get, client_api.features(edge))
    edge.route(f"{client}/features/<name>", get, client_api.feature(edge))
    edge.route(f"{client}/delta", get, delta_api.delta(edge))
    edge.route(f"{client}/streaming", ["GET"], delta_api.streaming(edge), observed=False)
    edge.route(f"{client}/metrics", post, client_api.usage(edge))
    edge.route(f"{client}/metrics/bulk", post, client_api.bulk_usage(edge))
    edge.route(f"{client}/register", post, client_api.register(edge))
    edge.route(f"{base}/edge/validate", post, client_api.validate(edge))
    backstage.add_routes(edge, f"{base}/internal-backstage", get)
    hot = ("", "/all") if not edge.settings.disable_all_endpoint else ("",)
    families = ("frontend", "proxy")
    HotRoutes(edge.app, [(m, f"{base}/api/{f}{a}") for f in families for a in hot for m in ("GET", "POST")])


def create_app(
    settings: EdgeSettings, instance_directory: str | None = None, parent_pid: int | None = None
) -> Sanic:
    """One process of `flagproxy edge`: with `parent_pid`, a worker following that main process's leader;
    without, the whole instance."""
    edge = EdgeApp(settings, instance_directory, parent_pid)
    add_routes(edge)
    return edge.app
