"""Environments: list, read, create, and SPEC.md's global `POST /api/admin/environments/:name/on|off`.

As in Unleash 8.2.0, a globally disabled environment is still listed and still served to SDKs; the flag
only records the administrator's choice (admin-api.md F12).
"""

from __future__ import annotations

from sanic import Blueprint, HTTPResponse, Request
from sanic_ext import openapi

from flagproxy.server.errors import NameExists
from flagproxy.server.routes.common import (
    changing,
    created,
    empty,
    json_response,
    require_environment,
    transaction,
)
from flagproxy.server.schemas import CreateEnvironmentBody
from flagproxy.server.shapes import environment_json
from flagproxy.server.storage import projects as project_rows
from flagproxy.server.validation import json_body

bp = Blueprint("environments", url_prefix="/api/admin/environments")


@bp.get("")
@openapi.summary("List environments")
@openapi.tag("Environments")
async def list_environments(request: Request) -> HTTPResponse:
    with transaction(request) as tx:
        rows = project_rows.environments(tx)
    return json_response({"version": 1, "environments": [environment_json(row) for row in rows]})


@bp.post("")
@openapi.summary("Create an environment")
@openapi.tag("Environments")
@json_body(CreateEnvironmentBody)
async def create_environment(request: Request, body: CreateEnvironmentBody) -> HTTPResponse:
    # A change to served data: every flag is served (off) in the new environment from now on.
    with changing(request) as tx:
        if project_rows.environment(tx, body.name) is not None:
            raise NameExists(f"An environment named {body.name} already exists")
        row = project_rows.insert_environment(tx, body.name, body.type, body.sortOrder, body.enabled)
    return created(environment_json(row), f"environments/{body.name}")


@bp.get("/<name>")
@openapi.summary("Read an environment")
@openapi.tag("Environments")
async def get_environment(request: Request, name: str) -> HTTPResponse:
    with transaction(request) as tx:
        row = require_environment(tx, name)
    return json_response(environment_json(row))


async def _switch(request: Request, name: str, enabled: bool) -> HTTPResponse:
    with changing(request) as tx:
        require_environment(tx, name)
        project_rows.set_environment_enabled(tx, name, enabled)
    return empty(204)


@bp.post("/<name>/on")
@openapi.summary("Enable an environment globally (204; 401, 403, 404)")
@openapi.tag("Environments")
async def environment_on(request: Request, name: str) -> HTTPResponse:
    return await _switch(request, name, True)


@bp.post("/<name>/off")
@openapi.summary("Disable an environment globally (204; 401, 403, 404)")
@openapi.tag("Environments")
async def environment_off(request: Request, name: str) -> HTTPResponse:
    return await _switch(request, name, False)
