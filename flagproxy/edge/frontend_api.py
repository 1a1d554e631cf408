"""Edge's frontend API: `/api/frontend…` and its `/api/proxy…` aliases, for frontend tokens.

The answers are the engine's bytes, as `flagproxy proxy` sends them: `{"toggles": [{name, enabled,
variant, impressionData}]}`. A GET takes the context from the query string (qs syntax), a POST from the
body (`{"context": {...}}` as the proxy client sends it, or the context object itself as Edge reads it).
The token's environment is the context's environment unless the caller names one. Usage posted by the
SDKs is counted in the token's environment (flagproxy/edge/usage.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from sanic import HTTPResponse, Request

from flagproxy.edge import client_api
from flagproxy.edge.app import EdgeApp
from flagproxy.edge.tokens import FRONTEND
from flagproxy.http.bodies import check_content_type, parse_json
from flagproxy.http.context import body_context, query_context
from flagproxy.http.errors import ClientError, type_error
from flagproxy.http.etag import weak_etag

Handler = Callable[..., Awaitable[HTTPResponse]]


def _post_context(raw: bytes) -> dict[str, Any]:
    body = parse_json(raw)
    if not isinstance(body, dict):
        raise type_error("/body", "#/components/schemas/sdkContextSchema", "object")
    if isinstance(body.get("context"), dict) or ("context" in body and len(body) == 1):
        return body_context(body)
    return body_context({"context": body})  # Edge's shape: the body is the context


def _evaluator(edge: EdgeApp, include_disabled: bool, post: bool) -> Handler:
    answer = edge.answer
    route = ("all" if include_disabled else "enabled") + ("-post" if post else "-get")

    fast = edge.gate.fast_for(FRONTEND)
    token_header = edge.token_header

    async def evaluate(request: Request) -> HTTPResponse:
        served: Any = fast(request.headers.get(token_header))
        if served is None or served.current is None:  # a token not seen yet, or no flags yet
            served = await edge.hydrated(request, FRONTEND)
            if isinstance(served, HTTPResponse):
                return served
        snapshot = served.current
        try:
            if post:
                check_content_type(request)
                raw: Any = request.body
            else:
                raw = request.query_string
        except ClientError as error:
            return edge.client_error(request, error)
        address = edge.remote_address(request) if snapshot.reads_remote_address else None
        cache = served.cache
        key = (route, raw, address)
        hit = cache.get(snapshot.answers, key) if cache is not None else None
        if hit is not None:
            body, etag = hit.body, hit.etag
        else:
            try:
                context = _post_context(raw) if post else query_context(raw)
            except ClientError as error:
                return edge.client_error(request, error)
            if "remoteAddress" not in context:
                context["remoteAddress"] = address or edge.remote_address(request)
            context.setdefault("environment", served.scope[0])
            body, valid_in = snapshot.evaluate_all_body(context, include_disabled)
            etag = weak_etag(body)
            if cache is not None:
                cache.put(snapshot.answers, key, body, etag, None, valid_in)
        return answer(request, body, etag, not post)  # POST answers are never 304

    return evaluate


def enabled_get(edge: EdgeApp) -> Handler:
    return _evaluator(edge, include_disabled=False, post=False)


def enabled_post(edge: EdgeApp) -> Handler:
    return _evaluator(edge, include_disabled=False, post=True)


def all_get(edge: EdgeApp) -> Handler:
    return _evaluator(edge, include_disabled=True, post=False)


def all_post(edge: EdgeApp) -> Handler:
    return _evaluator(edge, include_disabled=True, post=True)


def one_feature(edge: EdgeApp) -> Handler:
    """`/api/frontend/features/:name`: that flag's evaluation, enabled or not; 404 for a flag the token
    cannot see."""

    async def feature(request: Request, name: str) -> HTTPResponse:
        served = await edge.hydrated(request, FRONTEND)
        if isinstance(served, HTTPResponse):
            return served
        snapshot = served.current
        if snapshot is None:  # `hydrated` answered 503 for a scope without one; a scope never loses it
            return edge.not_ready(request)
        try:
            context = (
                _post_context(request.body)
                if request.method == "POST"
                else query_context(request.query_string)
            )
        except ClientError as error:
            return edge.client_error(request, error)
        context.setdefault("remoteAddress", edge.remote_address(request))
        context.setdefault("environment", served.scope[0])
        body, _ = snapshot.evaluate_all_body(context, True)
        for toggle in orjson.loads(body)["toggles"]:
            if toggle["name"] == name:
                return edge.json(request, orjson.dumps(toggle))
        return edge.json(request, orjson.dumps({"error": f"Feature {name!r} not found"}), 404)

    return feature


def usage(edge: EdgeApp) -> Handler:
    return client_api.usage(edge, FRONTEND)


def register(edge: EdgeApp) -> Handler:
    return client_api.register(edge, FRONTEND)
