"""Edge's client API for backend SDKs and downstream edges: features, metrics, register, /edge/validate.

`/api/client/features` answers the bytes of the token's served scope (its environment and projects,
built once per snapshot) with their ETag, 304 on If-None-Match; `namePrefix` narrows it (kept per
revision). `/edge/validate` is what a downstream `flagproxy edge` asks: it answers from this instance's
own token cache, asking its own upstream about tokens it has not seen.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from sanic import HTTPResponse, Request

from flagproxy.edge.app import EdgeApp
from flagproxy.edge.tokens import CLIENT
from flagproxy.edge.usage import check_bulk
from flagproxy.edge.validation import UpstreamUnavailable
from flagproxy.http.bodies import check_register, check_usage, read_json
from flagproxy.http.errors import ClientError
from flagproxy.http.serving import answer_can_arrive

Handler = Callable[..., Awaitable[HTTPResponse]]
MAX_VALIDATE = 1000  # tokens in one /edge/validate request


def features(edge: EdgeApp) -> Handler:
    async def client_features(request: Request) -> HTTPResponse:
        served = await edge.hydrated(request, CLIENT)
        if isinstance(served, HTTPResponse):
            return served
        snapshot = served.current
        if snapshot is None:  # `hydrated` answered 503 for a scope without one; a scope never loses it
            return edge.not_ready(request)
        prefix = request.args.get("namePrefix")
        if prefix:
            body, etag = served.with_prefix(snapshot, prefix)
            return edge.conditional(request, body, etag)
        return edge.conditional(request, snapshot.features_body, snapshot.features_etag)

    return client_features


def feature(edge: EdgeApp) -> Handler:
    async def client_feature(request: Request, name: str) -> HTTPResponse:
        served = await edge.hydrated(request, CLIENT)
        if isinstance(served, HTTPResponse):
            return served
        snapshot = served.current
        if snapshot is None:
            return edge.not_ready(request)
        found = served.feature(snapshot, name)
        if found is None:
            return edge.json(request, orjson.dumps({"error": f"Feature {name!r} not found"}), 404)
        return edge.json(request, orjson.dumps(found))

    return client_feature


def usage(edge: EdgeApp, family: str = CLIENT) -> Handler:
    """`…/client/metrics` of either family: a client bucket, counted in the token's environment."""

    async def post_usage(request: Request) -> HTTPResponse:
        served = await edge.served(request, family)
        if isinstance(served, HTTPResponse):
            return served
        try:
            body = read_json(request)
            toggles = check_usage(body)
        except ClientError as error:
            return edge.client_error(request, error)
        if not answer_can_arrive(request):
            return edge.empty(request, 503)
        edge.usage.add_bucket(served.scope[0], body["appName"], toggles)
        return edge.empty(request, 202)

    return post_usage


def bulk_usage(edge: EdgeApp) -> Handler:
    async def client_bulk_usage(request: Request) -> HTTPResponse:
        served = await edge.served(request, CLIENT)
        if isinstance(served, HTTPResponse):
            return served
        try:
            applications, entries = check_bulk(read_json(request))
        except ClientError as error:
            return edge.client_error(request, error)
        if not answer_can_arrive(request):
            return edge.empty(request, 503)
        environment = served.scope[0]  # the token's, whatever an entry says
        for application in applications:
            edge.usage.register(environment, application, edge.connect_via)
        for entry in entries:
            edge.usage.add(
                environment,
                entry["appName"],
                entry["featureName"],
                entry.get("yes", 0),
                entry.get("no", 0),
                entry.get("variants") or {},
                entry["timestamp"],
            )
        return edge.empty(request, 202)

    return client_bulk_usage


def register(edge: EdgeApp, family: str = CLIENT) -> Handler:
    """`…/client/register` of either family: kept with the next metrics batch upstream."""

    async def post_register(request: Request) -> HTTPResponse:
        served = await edge.served(request, family)
        if isinstance(served, HTTPResponse):
            return served
        try:
            body = read_json(request)
            check_register(body)
        except ClientError as error:
            return edge.client_error(request, error)
        if not answer_can_arrive(request):
            return edge.empty(request, 503)
        edge.usage.register(served.scope[0], body, edge.connect_via)
        return edge.empty(request, 202)

    return post_register


def validate(edge: EdgeApp) -> Handler:
    async def edge_validate(request: Request) -> HTTPResponse:
        try:
            body = read_json(request)
            if not isinstance(body, dict) or not isinstance(body.get("tokens"), list):
                raise ClientError(400, {"error": 'send {"tokens": ["<token>", ...]}'})
            secrets = body["tokens"]
            if len(secrets) > MAX_VALIDATE or not all(isinstance(t, str) for t in secrets):
                raise ClientError(400, {"error": f"tokens: at most {MAX_VALIDATE} strings"})
        except ClientError as error:
            return edge.client_error(request, error)
        unique = list(dict.fromkeys(secrets))
        if edge.offline:
            answers: list[Any] = [edge.validator.cached(secret)[1] for secret in unique]
        else:
            # Concurrently, so every token not seen yet goes upstream in one call.
            answers = await asyncio.gather(
                *(edge.validator.validate(s) for s in unique), return_exceptions=True
            )
        valid = []
        for secret, token in zip(unique, answers, strict=True):
            if isinstance(token, UpstreamUnavailable):
                return edge.json(request, orjson.dumps({"error": "the upstream cannot be reached"}), 503)
            if isinstance(token, BaseException):
                raise token
            if token is not None:
                valid.append({**token.describe(), "token": secret, "status": "Validated"})
        return edge.json(request, orjson.dumps({"tokens": valid}))

    return edge_validate
