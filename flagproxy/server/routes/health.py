"""`GET /health`: the server is up and its database answers."""

from __future__ import annotations

from sanic import Blueprint, HTTPResponse, Request
from sanic_ext import openapi

from flagproxy.server.routes.common import json_response, transaction
from flagproxy.server.storage import revision

bp = Blueprint("health")


@bp.get("/health")
@openapi.summary("Health check: 200 when the server and its database answer")
@openapi.tag("Health")
async def health(request: Request) -> HTTPResponse:
    with transaction(request) as tx:
        revision.current(tx)
    return json_response({"health": "GOOD"})
