"""The event log, newest first: `GET /api/admin/events` (`{version, events, totalEvents}`, `limit`: default
100) and Unleash's event search, `GET /api/admin/search/events` (`{events, total}`, `limit`: default 50), both
paged with `limit` (at most 1000) and `offset`."""

from __future__ import annotations

from sanic import Blueprint, HTTPResponse, Request
from sanic_ext import openapi

from flagproxy.server.errors import ValidationFailed
from flagproxy.server.routes.common import json_response, transaction
from flagproxy.server.storage import events as event_rows

bp = Blueprint("events", url_prefix="/api/admin/events")
search = Blueprint("event_search", url_prefix="/api/admin/search/events")
MAX_LIMIT = 1000


def _number(request: Request, name: str, default: int, lowest: int, highest: int) -> int:
    raw = request.args.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not lowest <= int(raw) <= highest:
        raise ValidationFailed(name, f"must be a whole number from {lowest} to {highest}")
    return int(raw)


def paging(request: Request, default_limit: int) -> tuple[int, int]:
    """(limit, offset) from the query: `limit` 1 to 1000 (default `default_limit`), `offset` from 0; 400
    naming the parameter otherwise. The console's event log pages with the same rule."""
    return _number(request, "limit", default_limit, 1, MAX_LIMIT), _number(request, "offset", 0, 0, 2**31)


@bp.get("")
@openapi.summary("The event log, newest first")
@openapi.tag("Events")
async def list_events(request: Request) -> HTTPResponse:
    shown, total = _page(request, default_limit=100)
    return json_response({"version": 1, "events": shown, "totalEvents": total})


@search.get("")
@openapi.summary("Search the event log (Unleash's event search): one page, newest first, and the total")
@openapi.description(
    "Query `limit` (default 50, at most 1000) and `offset` (default 0): whole numbers, else 400. Answers "
    "`{events: [{id, type, createdBy, createdAt, project, data}], total}`."
)
@openapi.parameter("limit", int, "query")
@openapi.parameter("offset", int, "query")
@openapi.tag("Events")
async def search_events(request: Request) -> HTTPResponse:
    shown, total = _page(request, default_limit=50)
    return json_response({"events": shown, "total": total})


def _page(request: Request, *, default_limit: int) -> tuple[list[dict[str, object]], int]:
    limit, offset = paging(request, default_limit)
    with transaction(request) as tx:
        return event_rows.page(tx, limit, offset)
