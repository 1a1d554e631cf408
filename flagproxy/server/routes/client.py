"""The client API that proxies and server-side SDKs read, in the Unleash wire format.

`GET /api/client/features` answers from bytes built once per data revision and query; a matching
If-None-Match gets 304. The client token decides the environment and, unless it covers every project,
the projects (its scope beats the `project` query parameter, as in Unleash).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import orjson
from sanic import Blueprint, HTTPResponse, Request
from sanic_ext import openapi

from flagproxy.server.client_features import ClientPayload, ClientQuery, build
from flagproxy.server.clock import hour_bucket, now_iso
from flagproxy.server.errors import NotFound
from flagproxy.server.routes.common import empty, json_response, tag_filter, transaction
from flagproxy.server.schemas import ClientMetricsBody, ClientRegisterBody
from flagproxy.server.storage import catalog as catalog_rows
from flagproxy.server.storage import features as feature_rows
from flagproxy.server.storage import projects as project_rows
from flagproxy.server.storage import revision
from flagproxy.server.storage import usage as usage_rows
from flagproxy.server.storage.catalog import Catalog
from flagproxy.server.storage.database import Tx
from flagproxy.server.tokens import ApiToken
from flagproxy.server.validation import json_body

bp = Blueprint("client", url_prefix="/api/client")
log = logging.getLogger("flagproxy.server")

# SDKs announcing client spec 4.2.0 or later understand segments by reference (Unleash's rule).
SEGMENTS_BY_REFERENCE_SPEC = (4, 2)


def segments_by_reference(spec_header: str | None) -> bool:
    if not spec_header:
        return False
    parts = spec_header.strip().lstrip("v").split(".")
    try:
        version = tuple(int(part) for part in parts[:2])
    except ValueError:
        return False
    return version >= SEGMENTS_BY_REFERENCE_SPEC


def client_query(request: Request, token: ApiToken) -> ClientQuery:
    projects: tuple[str, ...] | None = None if token.all_projects else tuple(sorted(token.projects))
    asked = tuple(sorted(set(request.args.getlist("project", []))))
    if projects is None and asked:
        projects = asked
    return ClientQuery(
        projects=projects,
        environment=token.environment,
        name_prefix=request.args.get("namePrefix") or None,
        tags=tag_filter(request),
        inline_segments=not segments_by_reference(request.headers.get("unleash-client-spec")),
    )


def catalog_at(request: Request, tx: Tx, latest: int) -> Catalog:
    """The catalog at revision `latest`: the one this worker already read for it, else read now (after the
    revision, so it may be newer than its label, never older)."""
    for cache in (request.app.ctx.payloads, request.app.ctx.hydrations):
        catalog = cache.catalog_for(latest)
        if catalog is not None:
            return catalog
    return catalog_rows.load(tx)


def current_payload(request: Request, query: ClientQuery) -> ClientPayload:
    cache = request.app.ctx.payloads
    with transaction(request) as tx:
        latest = revision.current(tx)
        payload = cache.get(query, latest)
        if payload is not None:
            return payload
        catalog = catalog_at(request, tx, latest)
    payload = build(catalog, query, latest)
    cache.put(query, payload, catalog)
    log.debug(
        "client features built: revision %d, query %s, %d bytes", latest, query.query_hash, len(payload.body)
    )
    return payload


@bp.get("/features")
@openapi.summary("Feature configuration for proxies and server SDKs (Unleash client API, version 2)")
@openapi.description(
    "Filtered by the client token's projects and environment, and by the `project`, `namePrefix` and "
    "`tag=type:value` query parameters. Send `Unleash-Client-Spec: 4.2.0` or later for top-level segments; "
    "without it segment constraints are inlined. ETag / If-None-Match -> 304."
)
@openapi.tag("Client API")
async def client_features(request: Request) -> HTTPResponse:
    payload = current_payload(request, client_query(request, request.ctx.token))
    headers = {"etag": payload.etag, "cache-control": "no-cache"}
    if request.headers.get("if-none-match") == payload.etag:
        return HTTPResponse(status=304, headers=headers)
    return HTTPResponse(payload.body, headers=headers, content_type="application/json; charset=utf-8")


@bp.get("/features/<name>")
@openapi.summary("One feature's configuration (segments inlined)")
@openapi.tag("Client API")
async def client_feature(request: Request, name: str) -> HTTPResponse:
    query = client_query(request, request.ctx.token)
    query = ClientQuery(projects=query.projects, environment=query.environment, inline_segments=True)
    payload = current_payload(request, query)
    for feature in orjson.loads(payload.body)["features"]:
        if feature["name"] == name:
            return json_response(feature)
    raise NotFound(f"Could not find feature flag {name}")


def application_row(body: ClientRegisterBody, environment: str) -> dict[str, object]:
    """A registration as usage_rows stores it (shared with the edge's bulk metrics)."""
    return {
        "app_name": body.appName,
        "instance_id": body.instanceId or "default",
        "sdk_version": body.sdkVersion,
        "environment": environment,
        "strategies": body.strategies,
        "interval_ms": int(body.interval) if body.interval is not None else None,
        "started": str(body.started) if body.started is not None else None,
    }


def record_usage(
    tx: Tx, environment: str, app_name: str, counts: Iterable[tuple[str, int, int, dict[str, int]]]
) -> None:
    """Add (feature, yes, no, variants) counts in `environment`, mark each feature seen there and move it
    to its lifecycle stage; counts for unknown flags or environments are dropped, as Unleash does."""
    seen_at = now_iso()
    hour = hour_bucket()
    env = project_rows.environment(tx, environment)
    if env is None:
        return
    stage = "live" if env["type"] == "production" else "pre-live"
    for name, yes, no, variants in counts:
        if feature_rows.feature(tx, name) is None:
            continue
        usage_rows.add_usage(
            tx, feature=name, environment=environment, app_name=app_name, hour=hour, yes=yes, no=no,
            variants=variants,
        )  # fmt: skip
        feature_rows.mark_seen(tx, name, environment, seen_at)
        feature_rows.enter_stage(tx, name, stage, seen_at)


@bp.post("/register")
@openapi.summary("An SDK or proxy announces itself (202)")
@openapi.tag("Client API")
@json_body(ClientRegisterBody)
async def register(request: Request, body: ClientRegisterBody) -> HTTPResponse:
    token: ApiToken = request.ctx.token
    with transaction(request) as tx:
        usage_rows.register_application(tx, application_row(body, token.environment), now_iso())
    return empty(202)


@bp.post("/metrics")
@openapi.summary("Usage counts from an SDK or proxy (202); sets lastSeenAt per feature environment")
@openapi.tag("Client API")
@json_body(ClientMetricsBody)
async def metrics(request: Request, body: ClientMetricsBody) -> HTTPResponse:
    return record_bucket(request, body)


def record_bucket(request: Request, body: ClientMetricsBody) -> HTTPResponse:
    """An SDK's bucket, counted in the token's environment (client and frontend APIs alike): 202."""
    environment = request.ctx.token.environment
    counts = [(n, c.yes, c.no, dict(c.variants)) for n, c in sorted(body.bucket.toggles.items())]
    with transaction(request) as tx:
        usage_rows.touch_application(tx, body.appName, body.instanceId or "default", environment, now_iso())
        record_usage(tx, environment, body.appName, counts)
    return empty(202)
