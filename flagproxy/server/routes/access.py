"""Who holds which project role: SPEC.md's `PUT /api/admin/projects/:projectId/access` (replace, one
transaction), `GET` (read) and `POST` (add without removing)."""

from __future__ import annotations

from typing import Any

from sanic import Blueprint, HTTPResponse, Request
from sanic_ext import openapi

from flagproxy.server.errors import ValidationFailed
from flagproxy.server.identity.bodies import AccessBody, AddAccessBody
from flagproxy.server.identity.permissions import PROJECT_TYPES
from flagproxy.server.routes.common import empty, json_response, require_project, transaction
from flagproxy.server.storage import access as access_rows
from flagproxy.server.storage import events, people
from flagproxy.server.storage.database import Tx
from flagproxy.server.validation import json_body

bp = Blueprint("access", url_prefix="/api/admin/projects/<project_id:str>/access")


def _check(tx: Tx, where: str, role_id: int, users: list[int], groups: list[int]) -> None:
    role = access_rows.role(tx, role_id)
    if role is None:
        raise ValidationFailed(f"{where}.id", f"there is no role with id {role_id}")
    if role["type"] not in PROJECT_TYPES:
        raise ValidationFailed(
            f"{where}.id", f"role {role_id} ({role['name']}) is a root role, not a project role"
        )
    for index, user_id in enumerate(users):
        if people.user(tx, user_id) is None:
            raise ValidationFailed(f"{where}.users[{index}]", f"there is no user with id {user_id}")
    for index, group_id in enumerate(groups):
        if access_rows.group(tx, group_id) is None:
            raise ValidationFailed(f"{where}.groups[{index}]", f"there is no group with id {group_id}")


def _assignments(
    role_id: int, users: list[int], groups: list[int]
) -> list[tuple[int, int | None, int | None]]:
    return [(role_id, user_id, None) for user_id in users] + [
        (role_id, None, group_id) for group_id in groups
    ]


@bp.get("")
@openapi.summary("The project's roles, users and groups, each with the role ids it holds here")
@openapi.tag("Project access")
async def get_access(request: Request, project_id: str) -> HTTPResponse:
    with transaction(request) as tx:
        require_project(tx, project_id)
        rows = access_rows.project_assignments(tx, project_id)
        role_ids = sorted({row["role_id"] for row in rows})
        users: dict[int, list[int]] = {}
        groups: dict[int, list[int]] = {}
        for row in rows:
            if row["user_id"] is not None:
                users.setdefault(row["user_id"], []).append(row["role_id"])
            if row["group_id"] is not None:
                groups.setdefault(row["group_id"], []).append(row["role_id"])
        shown: dict[str, Any] = {
            "roles": [access_rows.role_json(r) for r in (access_rows.role(tx, i) for i in role_ids) if r],
            "users": [],
            "groups": [],
        }
        for user_id, held in users.items():
            user = people.user(tx, user_id)
            if user is not None:
                shown["users"].append({**people.user_json(user), "roles": sorted(held)})
        for group_id, held in groups.items():
            group = access_rows.group(tx, group_id)
            if group is not None:
                shown["groups"].append({**access_rows.group_json(tx, group), "roles": sorted(held)})
    return json_response(shown)


@bp.put("")
@openapi.summary("Set every role of every user and group in the project, replacing what was there")
@openapi.tag("Project access")
@json_body(AccessBody)
async def set_access(request: Request, project_id: str, body: AccessBody) -> HTTPResponse:
    assignments: list[tuple[int, int | None, int | None]] = []
    with transaction(request) as tx:
        require_project(tx, project_id)
        for index, item in enumerate(body.roles):
            _check(tx, f"roles[{index}]", item.id, item.users, item.groups)
            assignments += _assignments(item.id, item.users, item.groups)
        access_rows.replace_project_access(tx, project_id, assignments)
        events.record(
            tx,
            "project-access-updated",
            request.ctx.caller.name,
            {"roles": [item.model_dump() for item in body.roles]},
            project=project_id,
        )
    return empty(200)


@bp.post("")
@openapi.summary("Give roles to users and groups in the project, keeping what they had")
@openapi.tag("Project access")
@json_body(AddAccessBody)
async def add_access(request: Request, project_id: str, body: AddAccessBody) -> HTTPResponse:
    with transaction(request) as tx:
        require_project(tx, project_id)
        assignments: list[tuple[int, int | None, int | None]] = []
        for index, role_id in enumerate(body.roles):
            _check(tx, f"roles[{index}]", role_id, body.users, body.groups)
            assignments += _assignments(role_id, body.users, body.groups)
        access_rows.add_project_access(tx, project_id, assignments)
        events.record(
            tx, "project-access-added", request.ctx.caller.name, body.model_dump(), project=project_id
        )
    return empty(200)
