"""`/internal-backstage/…`: health, readiness, Prometheus text, what is cached, which tokens are known.

Ready (200 `{"status":"READY"}`) once every start-up token is validated and every feed has features;
503 `{"status":"NOTREADY"}` before. `features` shows each served scope's flag names and revision, not
the flags' strategies, constraints or segments (Edge shows the whole documents); `tokens` never shows a
secret, only what is before its dot.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import orjson
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from sanic import HTTPResponse, Request

from flagproxy.edge.scopes import scope_name
from flagproxy.http import responses as r
from flagproxy.http.series import CONTENT_TYPE

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
        body = edge.request_series.series_text(EdgeCollector(edge))
        return r.DatedResponse(body, headers=edge.headers(request), content_type=CONTENT_TYPE)

    for name, handler in (
        ("health", health),
        ("ready", ready),
        ("features", features),
        ("tokens", tokens),
        ("metrics", metrics),
    ):
        edge.route(f"{root}/{name}", methods, handler)


class EdgeCollector:
    """Edge's own series, read from its state at each scrape (prometheus_client's custom collector), beside
    the request series of every process (flagproxy/http/series.py)."""

    def __init__(self, edge: Any) -> None:
        self.edge = edge

    def collect(self) -> Iterator[Metric]:
        edge = self.edge
        yield GaugeMetricFamily("edge_up", "Whether the instance is up.", value=1)
        yield GaugeMetricFamily(
            "edge_ready", "Whether every start-up token's environment has features.", value=int(edge.ready)
        )
        yield GaugeMetricFamily("edge_start_time_seconds", "When the instance started.", value=STARTED)
        known = GaugeMetricFamily(
            "edge_known_tokens", "Tokens in the validation cache, by state.", labels=["state"]
        )
        known.add_metric(["valid"], len(edge.validator.known))
        known.add_metric(["invalid"], len(edge.validator.invalid))
        yield known
        yield CounterMetricFamily(
            "edge_token_validation_requests",
            "Calls to the upstream's /edge/validate.",
            value=edge.validator.upstream_calls,
        )
        yield CounterMetricFamily(
            "edge_token_full_checks",
            "Requests whose token was checked in full (first sight, a refusal, no data yet); a token that "
            "passed before takes one lookup and is not counted.",
            value=edge.gate.full_checks,
        )
        updated = GaugeMetricFamily(
            "edge_features_last_update_ms",
            "When each scope's flags last changed (epoch ms).",
            labels=["environment", "projects"],
        )
        for scope, served in sorted(edge.scopes.served.items()):
            updated.add_metric([scope[0], ",".join(scope[1])], served.store.last_update_ms)
        yield updated
        yield CounterMetricFamily(
            "edge_metrics_batches_sent",
            "Bulk usage batches the upstream took.",
            value=edge.sync.sender.posts if edge.sync is not None else 0,
        )
