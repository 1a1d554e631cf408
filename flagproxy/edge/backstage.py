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

from flagproxy.edge.feeds import scope_name
from flagproxy.http import responses as r
from flagproxy.http.series import CONTENT_TYPE

Handler = Callable[[Request], Awaitable[HTTPResponse]]
STARTED = time.time()


def add_routes(edge: Any, root: str, methods: list[str]) -> None:
    async def health(request: Request) -> HTTPResponse:
        return edge.json(request, b'{"status":"OK"}')

    async def ready(request: Request) -> HTTPResponse:
        if await edge.is_ready():
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
        leader = await edge.link.status() or {}  # the instance's cache and feeds: the leader's
        shown = {"tokens": leader.get("tokens", []), "tokenRefreshes": leader.get("tokenRefreshes", [])}
        return edge.json(request, orjson.dumps(shown))

    async def metrics(request: Request) -> HTTPResponse:
        leader = await edge.link.status() or {}
        ready = bool(leader.get("ready")) and await edge.is_ready()
        body = await edge.request_series.series_text(EdgeCollector(edge, leader, ready))
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
    the request series of every process (flagproxy/http/series.py). The token cache's and the usage
    stream's are the instance leader's (`leader`: its status, flagproxy/edge/leader.py); the full checks
    and the scopes' update times are the answering worker's."""

    def __init__(self, edge: Any, leader: dict[str, Any], ready: bool) -> None:
        self.edge = edge
        self.leader = leader
        self.ready = ready

    def collect(self) -> Iterator[Metric]:
        edge, leader = self.edge, self.leader
        yield GaugeMetricFamily("edge_up", "Whether the instance is up.", value=1)
        yield GaugeMetricFamily(
            "edge_ready", "Whether every start-up token's environment has features.", value=int(self.ready)
        )
        yield GaugeMetricFamily("edge_start_time_seconds", "When the instance started.", value=STARTED)
        known = GaugeMetricFamily(
            "edge_known_tokens", "Tokens in the validation cache, by state.", labels=["state"]
        )
        known.add_metric(["valid"], leader.get("valid", 0))
        known.add_metric(["invalid"], leader.get("invalid", 0))
        yield known
        refused = CounterMetricFamily(
            "flagproxy_refused_documents",
            "Features documents refused whole (upstream feeds, the backup, the bootstrap file), by reason.",
            labels=["reason"],
        )
        for reason, count in sorted(leader.get("refused", {}).items()):
            refused.add_metric([reason], count)
        yield refused
        changes = CounterMetricFamily(
            "flagproxy_upstream_stream_changes",
            "Streamed changes applied (--streaming), by how: patched (relayed to the workers as events, each "
            "patching its engines) or whole (the feed published whole).",
            labels=["applied"],
        )
        for applied, count in sorted(leader.get("streamChanges", {}).items()):
            changes.add_metric([applied], count)
        yield changes
        yield CounterMetricFamily(
            "edge_token_validation_requests",
            "Calls to the upstream's /edge/validate.",
            value=leader.get("validations", 0),
        )
        yield CounterMetricFamily(
            "edge_token_full_checks",
            "Requests whose token was checked in full (first sight, a refusal, no data yet) by the "
            "worker that answers; a token that passed before takes one lookup and is not counted.",
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
            "edge_usage_batches_sent",
            "Bulk usage batches the upstream took.",
            value=leader.get("batchesSent", 0),
        )
