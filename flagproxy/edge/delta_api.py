"""Edge's delta API and stream for server SDKs and edges below it: `GET /api/client/delta` and
`GET /api/client/streaming`, Unleash's wire format (flagproxy/http/delta.py), from each feed's delta log
(flagproxy/edge/changes.py).

A client token reads the log of the feed its scope is cut from, scoped to its projects and the request's
`project` and `namePrefix`. `tag` is accepted and narrows nothing, as on Unleash Edge (its delta route
filters by the token's projects and `namePrefix` only): the features documents an edge reads carry no
tags to match. `/api/client/delta`: a hydration without If-None-Match or for a
revision the log does not keep, the events after a kept one, 304 when nothing newer concerns the reader;
ETag the last event's id. `/api/client/streaming`: `unleash-connected`, then `unleash-updated` as the
worker installs each new revision of the feed, until the token is revoked; beyond --max-streams open
streams on this worker, the `fetch-mode: polling` event and header.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from sanic import HTTPResponse, Request

from flagproxy.edge.app import EdgeApp
from flagproxy.edge.scopes import ServedScope
from flagproxy.edge.tokens import ALL_PROJECTS, CLIENT, request_secret
from flagproxy.http import delta as wire
from flagproxy.http.delta import Batch, back_to_polling, delta_headers, resumes, scoped, stream_changes
from flagproxy.http.responses import DatedResponse

Handler = Callable[..., Awaitable[HTTPResponse | None]]


@dataclass(frozen=True, slots=True)
class EdgeReader:
    """What scopes a request's events (flagproxy/http/delta.py `Reader`); the feed's log is the token's
    environment's, so no event names another environment."""

    projects: tuple[str, ...] | None
    name_prefix: str | None
    environment: str | None = None
    tags: tuple[tuple[str, str], ...] = ()


def reader_of(request: Request, served: ServedScope) -> EdgeReader:
    """The token's projects win (the feed's log may be broader than the token); a token of every project
    may narrow them with `project`, as the server does."""
    projects: tuple[str, ...] | None = served.scope[1]
    if ALL_PROJECTS in served.scope[1]:
        projects = tuple(sorted(set(request.args.getlist("project", [])))) or None
    return EdgeReader(projects, request.args.get("namePrefix") or None)


def catch_up(
    edge: EdgeApp, served: ServedScope, reader: EdgeReader, since: int | None
) -> tuple[bytes | None, int]:
    """(document, the revision it brings the reader to), or (None, since) when nothing newer concerns it."""
    log = edge.scopes.logs.get(served.source)
    last = log.last if log is not None else served.event_id
    known = since is not None and (log is None or log.issued(since))  # not an earlier run's id
    if known and since == last:
        return None, last
    if known and since is not None and log is not None and resumes(since, log.floor, log.last):
        wires, upto = scoped(log.events, reader, since)
        return (wire.document(wires), upto) if wires else (None, since)
    return served.hydration(reader), served.event_id


def delta(edge: EdgeApp) -> Handler:
    async def client_delta(request: Request) -> HTTPResponse:
        served = await edge.hydrated(request, CLIENT)
        if isinstance(served, HTTPResponse):
            return served
        edge.catch_up()  # whatever the leader published since this worker's last look
        since = wire.event_id(request.headers.get("if-none-match"))
        body, last = catch_up(edge, served, reader_of(request, served), since)
        headers = edge.headers(request, delta_headers(last))
        if body is None:
            return DatedResponse(status=304, headers=headers)
        return DatedResponse(body, headers=headers, content_type="application/json; charset=utf-8")

    return client_delta


def streaming(edge: EdgeApp) -> Handler:
    async def client_streaming(request: Request) -> HTTPResponse | None:
        served = await edge.hydrated(request, CLIENT)
        if isinstance(served, HTTPResponse):
            return served
        streams = edge.streams
        subscriber = streams.subscribe()
        if subscriber is None and streams.stopping:
            # A stopping edge is no reason to poll for good: the SDK reconnects (to this edge once it is
            # back) as after any failure, where `fetch-mode: polling` would keep it polling.
            return edge.empty(request, 503)
        if subscriber is None:
            edge.logger.info(f"streaming: {len(streams.subscribers)} streams open, asking a client to poll")
            return back_to_polling(edge.headers(request))
        reader = reader_of(request, served)
        secret = request_secret(request.headers.get(edge.token_header))

        def pick(batch: Batch, position: int) -> tuple[list[bytes], int, int] | None:
            if edge.validator.cached(secret)[1] is None:
                subscriber.stop()  # the token was revoked since: no more changes for it (as Unleash Edge)
                return [], position, position
            if batch.source != served.source or batch.upto <= position:
                return [], position, position  # another feed's, or already sent
            if batch.after is None or batch.after > position:
                return None  # events this stream has not seen are not in the batch
            wires, last = scoped(batch.events, reader, position)
            return wires, last, batch.upto

        def sent() -> None:
            edge.stream_messages.value += 1

        edge.open_streams.value += 1
        try:
            edge.catch_up()
            await stream_changes(
                request,
                subscriber,
                lambda since: catch_up(edge, served, reader, since),
                pick,
                edge.headers(request),
                sent,
            )
        finally:
            streams.unsubscribe(subscriber)
            edge.open_streams.value -= 1
        return None

    return client_streaming
