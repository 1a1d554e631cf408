"""What an edge asks its upstream: `POST /edge/validate` and `POST /api/client/metrics/bulk`.

`/edge/validate` takes `{"tokens": [...]}` and answers the valid ones with their type, environment and
projects, as Unleash does; it needs no credential (like Unleash's): a caller learns only about secrets it
already holds. Tokens are looked up by their SHA-256 (flagproxy/server/storage/tokens.py), never compared.
`/api/client/metrics/bulk` takes an edge's batch of applications and per-feature counts and records them
as `/api/client/metrics` does, in the environment of the client token that sent it.
"""

from __future__ import annotations

from pydantic import Field, StrictStr
from sanic import Blueprint, HTTPResponse, Request
from sanic_ext import openapi

from flagproxy.server.clock import now_iso
from flagproxy.server.routes.client import application_row, record_usage
from flagproxy.server.routes.common import empty, json_response, transaction
from flagproxy.server.schemas import Body, ClientRegisterBody, Count
from flagproxy.server.storage import tokens as token_rows
from flagproxy.server.storage import usage as usage_rows
from flagproxy.server.tokens import ApiToken
from flagproxy.server.validation import json_body

bp = Blueprint("edge")
bulk = Blueprint("client_bulk", url_prefix="/api/client")
MAX_TOKENS = 1000


class ValidateBody(Body):
    tokens: list[StrictStr] = Field(max_length=MAX_TOKENS)


class BulkMetric(Body):
    featureName: StrictStr = Field(min_length=1)
    appName: StrictStr = Field(min_length=1)
    environment: StrictStr | None = None
    timestamp: StrictStr | None = None
    yes: Count = 0
    no: Count = 0
    variants: dict[str, Count] = {}


class BulkBody(Body):
    applications: list[ClientRegisterBody] = Field(default=[], max_length=10_000)
    metrics: list[BulkMetric] = Field(default=[], max_length=100_000)


@bp.post("/edge/validate")
@openapi.summary("Which of these tokens are valid (for Unleash Edge and flagproxy edge)")
@openapi.tag("Edge")
@json_body(ValidateBody)
async def validate(request: Request, body: ValidateBody) -> HTTPResponse:
    valid = []
    with transaction(request) as tx:
        for secret in dict.fromkeys(body.tokens):
            token = token_rows.find(tx, secret)
            if token is None or token.expired or token.type == "admin":
                continue
            valid.append(
                {
                    "token": secret,
                    "type": token.type,
                    "environment": token.environment,
                    "projects": list(token.projects),
                    "status": "Validated",
                }
            )
    return json_response({"tokens": valid})


@bulk.post("/metrics/bulk")
@openapi.summary("An edge's batch of registrations and usage counts (202)")
@openapi.tag("Client API")
@json_body(BulkBody)
async def metrics_bulk(request: Request, body: BulkBody) -> HTTPResponse:
    token: ApiToken = request.ctx.token
    environment = token.environment  # the token's, whatever an entry says: an edge sends per environment
    by_app: dict[str, list[tuple[str, int, int, dict[str, int]]]] = {}
    for metric in body.metrics:
        counts = (metric.featureName, metric.yes, metric.no, dict(metric.variants))
        by_app.setdefault(metric.appName, []).append(counts)
    with transaction(request) as tx:
        for application in body.applications:
            usage_rows.register_application(tx, application_row(application, environment), now_iso())
        for app_name, app_counts in sorted(by_app.items()):
            record_usage(tx, environment, app_name, app_counts)
    return empty(202)
