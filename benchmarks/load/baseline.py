"""The ceiling: a Sanic app whose routes return fixed bodies, configured like the proxy, run as a subprocess.

    python -m benchmarks.load.baseline --routes routes.json --port 4243 --workers 2

`routes.json` is a list of `{"path", "status", "body_hex", "content_type", "headers"}`, one a scenario,
written by the harness from a real answer of the proxy to that scenario: the same status, a body of the
same bytes (so the same size) and the same response headers. The handler is the plain Sanic way to
answer, a new `HTTPResponse` per request; the proxy has to do that *and* read the request, evaluate and
hash, so proxy ÷ baseline says how much of Sanic's own ceiling the proxy reaches. Same Sanic settings as
the proxy where they matter: no access log, no sanic-ext, 5 s keep-alive, 100 kB request limit.
"""

from __future__ import annotations

import argparse
import json
from functools import partial
from typing import Any

from sanic import HTTPResponse, Request, Sanic
from sanic.worker.loader import AppLoader

from flagproxy.http.serving import serve

HEALTH_PATH = "/baseline/health"


def route_path(scenario_name: str) -> str:
    return f"/baseline/{scenario_name}"


def create_app(routes_path: str) -> Sanic:
    with open(routes_path) as file:
        routes = json.load(file)
    app = Sanic("flagproxy-load-baseline", configure_logging=False)
    app.config.AUTO_EXTEND = False
    app.config.KEEP_ALIVE_TIMEOUT = 5
    app.config.REQUEST_MAX_SIZE = 102400
    app.config.ACCESS_LOG = False
    app.config.NOISY_EXCEPTIONS = False
    for number, route in enumerate(routes):
        app.add_route(_fixed_handler(route), route["path"], methods=["GET", "POST"], name=f"fixed{number}")

    async def health(request: Request) -> HTTPResponse:
        return HTTPResponse(b"ok")

    app.add_route(health, HEALTH_PATH, name="health")
    return app


def _fixed_handler(route: dict[str, Any]) -> Any:
    body = bytes.fromhex(route["body_hex"])
    status = route["status"]
    headers = route["headers"]
    content_type = route["content_type"]

    async def fixed(request: Request) -> HTTPResponse:
        return HTTPResponse(body, status=status, headers=headers, content_type=content_type)

    return fixed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--routes", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    loader = AppLoader(factory=partial(create_app, args.routes))
    app = loader.load()
    app.prepare(
        host="127.0.0.1",
        port=args.port,
        workers=args.workers,
        access_log=False,
        motd=False,
        single_process=args.workers == 1,
    )
    serve(app, loader, args.workers)


if __name__ == "__main__":
    main()
