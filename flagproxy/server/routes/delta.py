"""Unleash's delta API and its stream, for server SDKs and edges that apply changes as they happen.

`GET /api/client/delta`: a hydration for a reader that names no revision (If-None-Match) or one the log
no longer keeps, the events after the one it names, or 304 when nothing newer concerns it. ETag is the
last event's id in quotes, as Unleash sends it. `GET /api/client/streaming`: server-sent events, first
`unleash-connected` (a hydration, or what was missed after `Last-Event-ID`), then `unleash-updated` with
each change's events; the SSE `id` is the last event's id. Both are scoped like `/api/client/features`.
"""

from __future__ import annotations

import dataclasses
import logging

from sanic import Blueprint, HTTPResponse, Request
from sanic_ext import openapi

from flagproxy.http.delta import (
    STREAM_HEADERS,
    Batch,
    back_to_polling,
    delta_headers,
    event_id,
    resumes,
    stream_changes,
)
from flagproxy.server.client_features import ClientPayload, ClientQuery
from flagproxy.server.delta import events as delta_events
from flagproxy.server.errors import NotFound
from flagproxy.server.routes.client import catalog_at, client_query
from flagproxy.server.routes.common import transaction
from flagproxy.server.storage import delta as delta_rows
from flagproxy.server.storage import revision

bp = Blueprint("client_delta", url_prefix="/api/client")
log = logging.getLogger("flagproxy.server")


def delta_query(request: Request) -> ClientQuery:
    if not request.app.ctx.settings.delta_api:
        raise NotFound("The delta API and streaming are turned off on this server (DELTA_API=false)")
    # Delta readers always get segments by reference: every SDK that reads deltas understands them.
    return dataclasses.replace(client_query(request, request.ctx.token), inline_segments=False)


def catch_up(request: Request, query: ClientQuery, since: int | None) -> tuple[bytes | None, int]:
    """(document, its last event id) bringing a reader at revision `since` up to date, or (None, since)
    when nothing newer concerns it: the events after `since` while the log keeps them, else a hydration."""
    with transaction(request) as tx:
        current = revision.current(tx)
        if since == current:
            return None, since
        if since is not None and resumes(since, delta_rows.floor(tx), current):
            rows = delta_rows.events_after(tx, since, query.environment)
            wires, last = delta_events.scoped(delta_events.parse(rows), query, since)
            return (delta_events.document(wires), last) if wires else (None, since)
        cache = request.app.ctx.hydrations
        cached = cache.get(query, current)
        if cached is not None:
            return cached.body, current
        catalog = catalog_at(request, tx, current)
    body = delta_events.document([delta_events.hydration(catalog, query, current)])
    cache.put(query, ClientPayload(current, body, f'"{current}"'), catalog)
    return body, current


@bp.get("/delta")
@openapi.summary("Changes since a revision (Unleash delta API)")
@openapi.description(
    "Without If-None-Match, or naming a revision the server no longer keeps: one `hydration` event with "
    'the token\'s features (segments by reference) and every segment. With `If-None-Match: "<eventId>"`: '
    "the `feature-updated`, `feature-removed`, `segment-updated` and `segment-removed` events after it, or "
    "304. ETag: the last event's id. Scoped like /api/client/features (token, `project`, `namePrefix`, "
    "`tag`)."
)
@openapi.tag("Client API")
async def client_delta(request: Request) -> HTTPResponse:
    query = delta_query(request)
    since = event_id(request.headers.get("if-none-match"))
    body, last = catch_up(request, query, since)
    headers = delta_headers(last)
    if body is None:
        return HTTPResponse(status=304, headers=headers)
    return HTTPResponse(body, headers=headers, content_type="application/json; charset=utf-8")


@bp.get("/streaming")
@openapi.summary("Changes as they happen (Unleash streaming, server-sent events)")
@openapi.description(
    "`unleash-connected` first (a hydration, or after `Last-Event-ID` the events missed), then "
    "`unleash-updated` with each change's events; the SSE id is the last event's id; a `: keep-alive` "
    "comment every 15 s. Beyond the server's stream limit: a `fetch-mode` event `polling` (and the "
    "`fetch-mode: polling` header), then the stream ends."
)
@openapi.response(200, {"text/event-stream": str}, "A stream of server-sent events that stays open")
@openapi.tag("Client API")
async def client_streaming(request: Request) -> HTTPResponse | None:
    query = delta_query(request)
    feed = request.app.ctx.delta_feed
    subscriber = feed.subscribe()
    if subscriber is None and feed.stopping:
        # A stopping process is no reason to poll for good: a reader reconnects (to a replica, or to this
        # server once restarted) as after any failure, where `fetch-mode: polling` would keep it polling.
        return HTTPResponse(status=503, headers={**STREAM_HEADERS, "retry-after": "1"})
    if subscriber is None:
        log.info("streaming: %d streams open, asking a client to poll", len(feed.subscribers))
        return back_to_polling()

    def pick(batch: Batch, position: int) -> tuple[list[bytes], int, int]:
        wires, last = delta_events.scoped(batch.events, query, position)
        return wires, last, max(position, batch.upto)

    series = request.app.ctx.series
    series.open_streams.value += 1

    def sent() -> None:
        series.stream_messages.value += 1

    try:
        # `pick` depends on the query and the position only: streams of one scope share each message.
        await stream_changes(
            request, subscriber, lambda since: catch_up(request, query, since), pick, {}, sent, share=query
        )
    finally:
        feed.unsubscribe(subscriber)
        series.open_streams.value -= 1
    return None
