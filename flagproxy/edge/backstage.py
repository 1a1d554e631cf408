"""`/internal-backstage/…`: health, readiness, Prometheus text, what is cached, which tokens are known.

Ready (200 `{"status":"READY"}`) once every start-up token is validated and every feed has features;
503 `{"status":"NOTREADY"}` before. `features` shows each served scope's flag names and revision, not
the flags' strategies, constraints or segments (Edge shows the whole documents); `tokens` never shows a
secret, only what is before its dot.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from sanic import HTTPResponse, Request

from flagproxy.edge.scopes import scope_name
from flagproxy.http import responses as r

Handler = Callable[[Request], Awaitable[HTTPResponse]]
STARTED = time.time()


def add_routes(edge: Any, root: str, methods: list[str]) -> None:
    async def health(request: Request) -> HTTPResponse:
        return edge.json(request, b'{"status":"OK"}')

    async def ready(request: Request) -> HTTPResponse:
        if edge.ready:
            return edge.json(request, b'{"status":"READY"}')
        return edge.json(request, b'{"status":"NOTREADY"}', 503)

    async def features(request: Request) -> HTTPResponse:
        shown = {}
        for scope, served in sorted(edge.scopes.served.items()):
            snapshot = served.current
            shown[scope_name(scope)] = {
                "environment": scope[0],
                "projects": list(scope[1]),
                "revision": snapshot.revision if snapshot else None,
                "features": sorted(snapshot.names) if snapshot else [],
            }
        return edge.json(request, orjson.dumps(shown))

    async def tokens(request: Request) -> HTTPResponse:
        feeds = [] if edge.sync is None else [feed.describe() for feed in edge.sync.feeds.values()]
        known = [token.describe() for token in edge.validator.tokens()]
        return edge.json(request, orjson.dumps({"tokens": known, "tokenRefreshes": feeds}))

    async def metrics(request: Request) -> HTTPResponse:
        lines = [
            "# HELP edge_up Whether the instance is up.",
            "# TYPE edge_up gauge",
            "edge_up 1",
            "# HELP edge_ready Whether every start-up token's environment has features.",
            "# TYPE edge_ready gauge",
            f"edge_ready {1 if edge.ready else 0}",
            "# HELP edge_start_time_seconds When the instance started.",
            "# TYPE edge_start_time_seconds gauge",
            f"edge_start_time_seconds {STARTED:.3f}",
            "# HELP edge_known_tokens Tokens in the validation cache, by state.",
            "# TYPE edge_known_tokens gauge",
            f'edge_known_tokens{{state="valid"}} {len(edge.validator.known)}',
            f'edge_known_tokens{{state="invalid"}} {len(edge.validator.invalid)}',
            "# HELP edge_token_validation_requests_total Calls to the upstream's /edge/validate.",
            "# TYPE edge_token_validation_requests_total counter",
            f"edge_token_validation_requests_total {edge.validator.upstream_calls}",
            "# HELP edge_token_full_checks_total Requests whose token was checked in full (first sight,"
            " a refusal, no data yet); a token that passed before takes one lookup and is not counted.",
            "# TYPE edge_token_full_checks_total counter",
            f"edge_token_full_checks_total {edge.gate.full_checks}",
            "# HELP edge_features_last_update_ms When each scope's flags last changed (epoch ms).",
            "# TYPE edge_features_last_update_ms gauge",
        ]
        for scope, served in sorted(edge.scopes.served.items()):
            labels = f'environment="{_label(scope[0])}",projects="{_label(",".join(scope[1]))}"'
            lines.append(f"edge_features_last_update_ms{{{labels}}} {served.store.last_update_ms}")
        sent = edge.sync.sender.posts if edge.sync is not None else 0
        lines += [
            "# HELP edge_metrics_batches_sent_total Bulk metrics batches the upstream took.",
            "# TYPE edge_metrics_batches_sent_total counter",
            f"edge_metrics_batches_sent_total {sent}",
        ]
        body = ("\n".join(lines) + "\n").encode() + edge.request_series.series_text()
        return r.DatedResponse(body, headers=edge.headers(request), content_type="text/plain; version=0.0.4")

    for name, handler in (
        ("health", health),
        ("ready", ready),
        ("features", features),
        ("tokens", tokens),
        ("metrics", metrics),
    ):
        edge._route(f"{root}/{name}", methods, handler)


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
