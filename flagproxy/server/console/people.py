"""People: users (create, change root role, delete), invite links (create: the URL shown once), roles with
their permissions (create custom ones), groups (create with members), and a project's access (give a
user or group a project role). Each form posts to the admin API route of the same name."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
from sanic import Blueprint, HTTPResponse, Request

from flagproxy.server.console.render import html, signed_in
from flagproxy.server.identity.permissions import (
    ENVIRONMENT_PERMISSIONS,
    PROJECT_PERMISSIONS,
    ROOT_PERMISSIONS,
)
from flagproxy.server.routes.common import require_project
from flagproxy.server.storage import access as access_rows
from flagproxy.server.storage import people as people_rows

bp = Blueprint("console_people")
INVITE_DAYS = 7


def _roles(tx: object) -> list[dict[str, object]]:
    """Every role with the permissions it holds (name, environment)."""
    return [
        {**access_rows.role_json(row), "builtIn": bool(row["built_in"]),
         "permissions": access_rows.permissions_of(tx, int(row["id"]))}  # type: ignore[arg-type]
        for row in access_rows.all_roles(tx)  # type: ignore[arg-type]
    ]  # fmt: skip


@bp.get("/console/users")
@signed_in
async def users(request: Request) -> HTTPResponse:
    with request.app.ctx.db.transaction(read_only=True) as tx:
        shown = [people_rows.user_json(row) for row in people_rows.all_users(tx)]
        invites = [
            {**row, "users": len(people_rows.invited_users(tx, row["secret_hash"]))}
            for row in people_rows.all_invites(tx)
        ]
        roles = [r for r in _roles(tx) if r["type"] in ("root", "root-custom")]
    expires = (datetime.now(UTC) + timedelta(days=INVITE_DAYS)).strftime("%Y-%m-%dT%H:%M")
    return await html(
        request, "users.html", users=shown, invites=invites, roles=roles, invite_expires=expires
    )


@bp.get("/console/roles")
@signed_in
async def roles(request: Request) -> HTTPResponse:
    with request.app.ctx.db.transaction(read_only=True) as tx:
        shown = _roles(tx)
    return await html(
        request,
        "roles.html",
        roles=shown,
        root_permissions=sorted(ROOT_PERMISSIONS),
        project_permissions=sorted(PROJECT_PERMISSIONS | ENVIRONMENT_PERMISSIONS),
    )


@bp.get("/console/groups")
@signed_in
async def groups(request: Request) -> HTTPResponse:
    with request.app.ctx.db.transaction(read_only=True) as tx:
        shown = [access_rows.group_json(tx, row) for row in access_rows.all_groups(tx)]
        everyone = [people_rows.user_json(row) for row in people_rows.all_users(tx)]
    return await html(request, "groups.html", groups=shown, users=everyone)


def _access_without(rows: list[dict[str, object]], left_out: int) -> str:
    """The body of `PUT .../access` that keeps every assignment but the one at `left_out`: the API's way to
    take one role back (it replaces the project's whole access)."""
    roles: dict[object, dict[str, list[object]]] = {}
    for index, row in enumerate(rows):
        if index == left_out:
            continue
        held = roles.setdefault(row["role_id"], {"users": [], "groups": []})
        if row["user_id"] is not None:
            held["users"].append(row["user_id"])
        else:
            held["groups"].append(row["group_id"])
    return orjson.dumps({"roles": [{"id": role, **held} for role, held in roles.items()]}).decode()


@bp.get("/console/projects/<project_id>/access")
@signed_in
async def project_access(request: Request, project_id: str) -> HTTPResponse:
    with request.app.ctx.db.transaction(read_only=True) as tx:
        project = require_project(tx, project_id)
        role_names = {row["id"]: row["name"] for row in access_rows.all_roles(tx)}
        held = []
        rows = access_rows.project_assignments(tx, project_id)
        for index, row in enumerate(rows):
            if row["user_id"] is not None:
                user = people_rows.user(tx, int(row["user_id"]))
                who = (
                    (user["name"] or user["email"] or user["username"]) if user else f"user {row['user_id']}"
                )
            else:
                group = access_rows.group(tx, int(row["group_id"]))
                who = group["name"] if group else f"group {row['group_id']}"
            held.append(
                {
                    "kind": "user" if row["user_id"] is not None else "group",
                    "who": who,
                    "role": role_names.get(row["role_id"]),
                    "without": _access_without(rows, index),
                }
            )
        project_roles = [r for r in _roles(tx) if r["type"] in ("project", "custom")]
        everyone = [people_rows.user_json(row) for row in people_rows.all_users(tx)]
        all_groups = [access_rows.group_json(tx, row) for row in access_rows.all_groups(tx)]
    return await html(
        request,
        "access.html",
        project=project,
        held=held,
        roles=project_roles,
        users=everyone,
        groups=all_groups,
    )
