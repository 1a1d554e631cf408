"""Projects: list, create, read, rename (`PUT`), delete, and SPEC.md's
`GET /api/admin/projects/:projectId/features`.

Deleting follows Unleash's ProjectService.deleteProject: the default project cannot be deleted, nor a
project that still holds flags that are not archived; its archived flags and segments are deleted with it."""

from __future__ import annotations

from sanic import Blueprint, HTTPResponse, Request
from sanic_ext import openapi

from flagproxy.server.errors import InvalidOperation, NameExists
from flagproxy.server.identity.permissions import OWNER_ROLE
from flagproxy.server.routes.common import (
    changing,
    created,
    empty,
    json_response,
    require_project,
    tag_filter,
    transaction,
)
from flagproxy.server.schemas import CreateProjectBody, UpdateProjectBody
from flagproxy.server.shapes import project_feature_list, project_json
from flagproxy.server.storage import access as access_rows
from flagproxy.server.storage import catalog as catalog_rows
from flagproxy.server.storage import events
from flagproxy.server.storage import features as feature_rows
from flagproxy.server.storage import projects as project_rows
from flagproxy.server.validation import json_body

bp = Blueprint("projects", url_prefix="/api/admin/projects")
DEFAULT_PROJECT = "default"  # what a fresh server has, and what Unleash never lets go


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


@bp.put("/<project_id>")
@openapi.summary("Rename a project or change its description (200, no body)")
@openapi.description("Body `{name, description?}`; a description left out stays as it is. 404: no project.")
@openapi.tag("Projects")
@json_body(UpdateProjectBody)
async def update_project(request: Request, project_id: str, body: UpdateProjectBody) -> HTTPResponse:
    with transaction(request) as tx:
        before = project_json(require_project(tx, project_id))
        project_rows.update_project(tx, project_id, body.model_dump(include={"name", *body.model_fields_set}))
        after = project_json(require_project(tx, project_id))
        # As Unleash: the event is recorded for every update, with the project before and after.
        change = {"data": after, "preData": before}
        events.record(tx, "project-updated", request.ctx.caller.name, change, project=project_id)
    return empty(200)


@bp.delete("/<project_id>")
@openapi.summary("Delete a project (200); refused (403) for the default project or one that holds flags")
@openapi.description(
    "Only a project whose flags are all archived (or that has none) can be deleted; its archived flags, its "
    "segments and its access assignments are deleted with it. The `default` project cannot be deleted. "
    "404: no project."
)
@openapi.tag("Projects")
async def delete_project(request: Request, project_id: str) -> HTTPResponse:
    with changing(request) as tx:
        require_project(tx, project_id)
        if project_id == DEFAULT_PROJECT:
            raise InvalidOperation("You can not delete the default project!")
        if project_rows.feature_names(tx, project_id, archived=False):
            raise InvalidOperation("You can not delete a project with active feature flags")
        for name in project_rows.feature_names(tx, project_id, archived=True):
            feature_rows.delete_feature(tx, name)
        project_rows.delete_project(tx, project_id)
        events.record(tx, "project-deleted", request.ctx.caller.name, {"id": project_id}, project=project_id)
    return empty(200)


@bp.get("/<project_id>/features")
@openapi.summary("List a project's features with every field ({version: 2, features})")
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
