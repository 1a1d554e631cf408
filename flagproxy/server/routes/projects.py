"""Projects: list, create, read, and SPEC.md's `GET /api/admin/projects/:projectId/features`."""

from __future__ import annotations

from sanic import Blueprint, HTTPResponse, Request
from sanic_ext import openapi

from flagproxy.server.errors import NameExists
from flagproxy.server.identity.permissions import OWNER_ROLE
from flagproxy.server.routes.common import created, json_response, require_project, tag_filter, transaction
from flagproxy.server.schemas import CreateProjectBody
from flagproxy.server.shapes import project_feature_list, project_json
from flagproxy.server.storage import access as access_rows
from flagproxy.server.storage import catalog as catalog_rows
from flagproxy.server.storage import events
from flagproxy.server.storage import projects as project_rows
from flagproxy.server.validation import json_body

bp = Blueprint("projects", url_prefix="/api/admin/projects")


@bp.get("")
@openapi.summary("List projects")
@openapi.tag("Projects")
async def list_projects(request: Request) -> HTTPResponse:
    with transaction(request) as tx:
        rows = project_rows.projects(tx)
    return json_response({"version": 1, "projects": [project_json(row) for row in rows]})


@bp.post("")
@openapi.summary("Create a project")
@openapi.tag("Projects")
@json_body(CreateProjectBody)
async def create_project(request: Request, body: CreateProjectBody) -> HTTPResponse:
    with transaction(request) as tx:
        if project_rows.project(tx, body.id) is not None:
            raise NameExists(f"A project with id {body.id} already exists")
        row = project_rows.insert_project(tx, body.id, body.name, body.description)
        caller = request.ctx.caller
        if caller.user_id is not None:  # the creator owns it
            access_rows.add_project_access(tx, body.id, [(OWNER_ROLE, caller.user_id, None)])
        events.record(tx, "project-created", caller.name, {"id": body.id}, project=body.id)
    return created(project_json(row), f"projects/{body.id}")


@bp.get("/<project_id>")
@openapi.summary("Read a project")
@openapi.tag("Projects")
async def get_project(request: Request, project_id: str) -> HTTPResponse:
    with transaction(request) as tx:
        row = require_project(tx, project_id)
    return json_response(project_json(row))


@bp.get("/<project_id>/features")
@openapi.summary("List a project's features with every field (SPEC.md's feature list wrapper)")
@openapi.description(
    "Query: `namePrefix` (case-insensitive prefix), `tag=type:value` (repeatable, any matches). An unknown "
    "project gives an empty list, as in Unleash. Archived features are left out."
)
@openapi.tag("Features")
async def project_features(request: Request, project_id: str) -> HTTPResponse:
    prefix = (request.args.get("namePrefix") or "").lower()
    tags = tag_filter(request)
    with transaction(request) as tx:
        catalog = catalog_rows.load(tx)
    features = project_feature_list(catalog, project_id, lambda name: name.lower().startswith(prefix), tags)
    return json_response({"version": 2, "features": features})
