"""`GET /api/admin/events`: the event log, newest first, paged (`limit`: default 100, at most 1000;
`offset`)."""

from __future__ import annotations

from sanic import Blueprint, HTTPResponse, Request
from sanic_ext import openapi

from flagproxy.server.errors import ValidationFailed
from flagproxy.server.routes.common import json_response, transaction
from flagproxy.server.storage import events as event_rows

bp = Blueprint("events", url_prefix="/api/admin/events")


def _number(request: Request, name: str, default: int, highest: int) -> int:
    raw = request.args.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or int(raw) > highest:
        raise ValidationFailed(name, f"must be a whole number from 0 to {highest}")
    return int(raw)


@bp.get("")
@openapi.summary("The event log, newest first")
@openapi.tag("Events")
async def list_events(request: Request) -> HTTPResponse:
    limit = _number(request, "limit", 100, 1000)
    offset = _number(request, "offset", 0, 2**31)
    with transaction(request) as tx:
        shown, total = event_rows.page(tx, limit, offset)
    return json_response({"version": 1, "events": shown, "totalEvents": total})
