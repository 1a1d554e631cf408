"""Small helpers every route module uses."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
from sanic import HTTPResponse, Request

from flagproxy.http.responses import DatedResponse
from flagproxy.server.delta import log as delta_log
from flagproxy.server.errors import NotFound, ValidationFailed
from flagproxy.server.storage import features as feature_rows
from flagproxy.server.storage import projects as project_rows
from flagproxy.server.storage import revision
from flagproxy.server.storage.database import Row, Tx

_SHA256_HEX = re.compile(r"[0-9a-fA-F]{64}")


def is_digest(named: str) -> bool:
    """Whether a path names a secret by its SHA-256 (64 hex digits): the console names tokens and invite
    links so, so that its pages never hold the secret itself."""
    return _SHA256_HEX.fullmatch(named) is not None


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> HTTPResponse:
    return HTTPResponse(
        orjson.dumps(data), status=status, headers=headers, content_type="application/json; charset=utf-8"
    )


def created(data: Any, location: str) -> HTTPResponse:
    """201 with the new resource and where it lives, as Unleash answers a create."""
    return json_response(data, status=201, headers={"location": location})


def empty(status: int = 200) -> HTTPResponse:
    """No body, so no Content-Type (as Unleash's `res.status(200).end()`)."""
    return DatedResponse(status=status)


@contextmanager
def transaction(request: Request) -> Iterator[Tx]:
    """The request's unit of work; GET requests only read, so they do not take SQLite's write lock."""
    with request.app.ctx.db.transaction(read_only=request.method in ("GET", "HEAD")) as tx:
        yield tx


@contextmanager
def changing(request: Request) -> Iterator[Tx]:
    """A unit of work that may alter what the client API serves. The delta log compares what is served after
    it with what it last recorded (flagproxy/server/delta/log.py); only when something differs does the data
    revision go up, with the new events numbered by it, so every worker and instance rebuilds its client
    payload and proxies see a new ETag. An identical PUT, switching on a flag that is on, or a change to
    something the client API does not serve moves nothing. Such units take the revision row first, one at
    a time, so what the log compares with is what the unit before left."""
    with transaction(request) as tx:
        revision.hold(tx)
        yield tx
        changed = delta_log.record(tx, request.app.ctx.settings.delta_kept_events, revision.current(tx) + 1)
        if changed:
            revision.bump(tx)
    if changed and request.app.ctx.delta_feed is not None:
        request.app.ctx.delta_feed.wake()


def path_id(value: str, what: str) -> int:
    """A numeric id from the path; anything else is a resource that does not exist (404)."""
    if not value.isdigit() or len(value) > 15:
        raise NotFound(f"Could not find {what} with id {value}")
    return int(value)


def require_project(tx: Tx, project_id: str) -> Row:
    project = project_rows.project(tx, project_id)
    if project is None:
        raise NotFound(f"Active project with id {project_id} does not exist")
    return project


def require_environment(tx: Tx, name: str) -> Row:
    environment = project_rows.environment(tx, name)
    if environment is None:
        raise NotFound(f"Could not find environment {name}")
    return environment


def require_feature(tx: Tx, project_id: str, name: str, *, archived: bool = False) -> Row:
    """The feature `name` of project `project_id` (archived ones only when asked for)."""
    feature = feature_rows.feature(tx, name)
    if feature is None or feature["project"] != project_id or (bool(feature["archived"]) and not archived):
        raise NotFound(f'There\'s no feature named "{name}" in project "{project_id}".')
    return feature


def require_feature_environment(tx: Tx, project_id: str, name: str, environment: str) -> tuple[Row, Row]:
    """The feature (not archived) and the environment of a `.../features/:name/environments/:env` path."""
    feature = require_feature(tx, project_id, name)
    env = project_rows.environment(tx, environment)
    if env is None:
        raise NotFound(f"Could not find environment {environment} for feature: {name}")
    return feature, env


def tag_filter(request: Request) -> tuple[tuple[str, str], ...]:
    """`tag=type:value` query parameters (repeatable, any of them matches); 400 on a malformed one."""
    wanted: list[tuple[str, str]] = []
    for index, text in enumerate(request.args.getlist("tag", [])):
        tag_type, colon, value = text.partition(":")
        if not (colon and tag_type and value):
            raise ValidationFailed(f"tag[{index}]", f"must look like type:value. You provided {text!r}.")
        wanted.append((tag_type, value))
    return tuple(sorted(set(wanted)))
