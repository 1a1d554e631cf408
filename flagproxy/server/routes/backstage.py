"""`GET /internal-backstage/prometheus`: the server's series, Prometheus text (flagproxy/server/series.py)."""

from __future__ import annotations

from sanic import Blueprint, HTTPResponse, Request
from sanic_ext import openapi

from flagproxy.http.series import CONTENT_TYPE

bp = Blueprint("backstage")


@bp.get("/internal-backstage/prometheus")
@openapi.summary("Prometheus series: open delta streams and the messages sent on them, over all workers")
@openapi.description(
    "`flagproxy_delta_streams` (a gauge: /api/client/streaming connections open now) and "
    "`flagproxy_delta_stream_messages_total` (`unleash-connected` and `unleash-updated` events sent), "
    "summed over the server's workers. No token needed, as Unleash's."
)
@openapi.tag("Health")
async def prometheus(request: Request) -> HTTPResponse:
    return HTTPResponse(await request.app.ctx.series.series.series_text(), content_type=CONTENT_TYPE)
