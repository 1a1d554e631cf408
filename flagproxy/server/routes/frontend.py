"""Unleash's frontend API on the server, for frontend tokens, evaluated with flagproxy's engine.

`GET/POST /api/frontend` (enabled flags) and `/api/frontend/all` (every flag) answer `{"toggles": [{name,
enabled, variant, impressionData}]}` for the request's context (read by flagproxy/http/context.py, the
proxy's and edge's parser) in the token's environment and projects: the payload a client token of that
scope reads, compiled once per data revision (flagproxy/server/frontend_snapshots.py).
`/api/frontend/client/metrics` and `/register` record usage and applications as the client API does. The
answer never holds strategies, constraints or segments.
"""

from __future__ import annotations

from sanic import Blueprint, HTTPResponse, Request
from sanic_ext import openapi

from flagproxy.server.client_features import ClientQuery
from flagproxy.server.clock import now_iso
from flagproxy.server.routes.client import application_row, current_payload, record_bucket
from flagproxy.server.routes.common import empty, transaction
from flagproxy.server.schemas import ClientMetricsBody, ClientRegisterBody
from flagproxy.server.storage import usage as usage_rows
from flagproxy.server.tokens import ApiToken
from flagproxy.server.validation import json_body, request_context, require_json

bp = Blueprint("frontend", url_prefix="/api/frontend")


def _evaluate(request: Request, context: dict, include_disabled: bool) -> HTTPResponse:
    token: ApiToken = request.ctx.token
    projects = None if token.all_projects else tuple(sorted(token.projects))
    query = ClientQuery(projects=projects, environment=token.environment, inline_segments=False)
    snapshot = request.app.ctx.frontend.get(query, current_payload(request, query))
    context["environment"] = token.environment
    context.setdefault("remoteAddress", request.app.ctx.remote_address(request))
    body, _ = snapshot.evaluate_all_body(context, include_disabled)
    return HTTPResponse(
        body, headers={"cache-control": "no-cache"}, content_type="application/json; charset=utf-8"
    )


@bp.get("")
@openapi.summary("Enabled flags for the query's context (frontend token)")
@openapi.tag("Frontend API")
async def enabled_get(request: Request) -> HTTPResponse:
    return _evaluate(request, request_context(request.query_string), False)


@bp.post("")
@openapi.summary("Enabled flags for the body's context (frontend token)")
@openapi.tag("Frontend API")
async def enabled_post(request: Request) -> HTTPResponse:
    return _evaluate(request, request_context(body=require_json(request)), False)


@bp.get("/all")
@openapi.summary("Every flag, disabled ones too, for the query's context (frontend token)")
@openapi.tag("Frontend API")
async def all_get(request: Request) -> HTTPResponse:
    return _evaluate(request, request_context(request.query_string), True)


@bp.post("/all")
@openapi.summary("Every flag, disabled ones too, for the body's context (frontend token)")
@openapi.tag("Frontend API")
async def all_post(request: Request) -> HTTPResponse:
    return _evaluate(request, request_context(body=require_json(request)), True)


@bp.post("/client/metrics")
@openapi.summary("Usage counts from a frontend SDK (202)")
@openapi.tag("Frontend API")
@json_body(ClientMetricsBody)
async def metrics(request: Request, body: ClientMetricsBody) -> HTTPResponse:
    return record_bucket(request, body)


@bp.post("/client/register")
@openapi.summary("A frontend SDK announces itself (202)")
@openapi.tag("Frontend API")
@json_body(ClientRegisterBody)
async def register(request: Request, body: ClientRegisterBody) -> HTTPResponse:
    with transaction(request) as tx:
        usage_rows.register_application(tx, application_row(body, request.ctx.token.environment), now_iso())
    return empty(202)
