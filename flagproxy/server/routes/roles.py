"""Custom roles (SPEC.md's `POST /api/admin/roles`, Unleash Enterprise's shapes): root roles with root
permissions (`root-custom`) and project roles with project and environment permissions (`custom`)."""

from __future__ import annotations

from typing import Any

from sanic import Blueprint, HTTPResponse, Request
from sanic_ext import openapi

from flagproxy.server.errors import NameExists, NoAccess, NotFound, ValidationFailed
from flagproxy.server.identity.bodies import RoleBody
from flagproxy.server.identity.permissions import (
    ENVIRONMENT_PERMISSIONS,
    PERMISSION_IDS,
    PERMISSION_NAMES,
    PROJECT_PERMISSIONS,
    ROOT_PERMISSIONS,
)
from flagproxy.server.routes.common import empty, json_response, path_id, transaction
from flagproxy.server.storage import access as access_rows
from flagproxy.server.storage import events
from flagproxy.server.storage.database import Row, Tx
from flagproxy.server.validation import json_body

bp = Blueprint("roles", url_prefix="/api/admin/roles")


def _permissions(body: RoleBody, role_type: str) -> list[tuple[str, str | None]]:
    """The body's permission items as (name, environment); 400 naming every one that does not exist or does
    not belong in this kind of role."""
    allowed = (
        ROOT_PERMISSIONS if role_type == "root-custom" else PROJECT_PERMISSIONS | ENVIRONMENT_PERMISSIONS
    )
    found: list[tuple[str, str | None]] = []
    unknown: list[str] = []
    for item in body.permissions:
        name = PERMISSION_NAMES.get(item.id) if item.id is not None else item.name
        if name is None or name not in allowed:
            shown = item.name or (
                f"permission with ID: {item.id}" if item.id is not None else "(no name or id)"
            )
            unknown.append(str(shown))
            continue
        environment = item.environment or None
        found.append((name, environment if name in ENVIRONMENT_PERMISSIONS else None))
    if unknown:
        kind = "root" if role_type == "root-custom" else "project"
        raise ValidationFailed(
            "permissions",
            f"Invalid permissions supplied. The following permissions don't exist for a {kind} role: "
            + ", ".join(unknown),
        )
    return found


def _role_type(body: RoleBody) -> str:
    if body.type in (None, "custom"):
        return "custom"
    if body.type == "root-custom":
        return "root-custom"
    raise ValidationFailed("type", "must be root-custom or custom")


def _detail(tx: Tx, row: Row) -> dict[str, Any]:
    permissions = access_rows.permissions_of(tx, int(row["id"]))
    return {
        **access_rows.role_json(row),
        "permissions": [
            {"id": PERMISSION_IDS[name], "name": name, "environment": environment}
            for name, environment in permissions
        ],
    }


def _editable(tx: Tx, role_id: int) -> Row:
    row = access_rows.role(tx, role_id)
    if row is None:
        raise NotFound(f"Could not find role with id {role_id}")
    if row["built_in"]:
        raise NoAccess("You cannot change built in roles.")
    return row


@bp.get("")
@openapi.summary("List roles (built-in and custom)")
@openapi.tag("Roles")
async def list_roles(request: Request) -> HTTPResponse:
    with transaction(request) as tx:
        roles = [access_rows.role_json(row) for row in access_rows.all_roles(tx)]
    return json_response({"version": 1, "roles": roles})


@bp.get("/permissions")
@openapi.summary("Every permission a role can hold, with its id")
@openapi.tag("Roles")
async def list_permissions(request: Request) -> HTTPResponse:
    def listed(names: frozenset[str]) -> list[dict[str, Any]]:
        return [{"id": PERMISSION_IDS[name], "name": name} for name in sorted(names)]

    return json_response(
        {
            "root": listed(ROOT_PERMISSIONS),
            "project": listed(PROJECT_PERMISSIONS),
            "environments": listed(ENVIRONMENT_PERMISSIONS),
        }
    )


@bp.post("")
@openapi.summary("Create a custom role (200 {version, roles})")
@openapi.tag("Roles")
@json_body(RoleBody)
async def create_role(request: Request, body: RoleBody) -> HTTPResponse:
    role_type = _role_type(body)
    permissions = _permissions(body, role_type)
    with transaction(request) as tx:
        if access_rows.role_by_name(tx, body.name) is not None:
            raise NameExists(f"There already exists a role with the name {body.name}")
        role_id = access_rows.insert_role(tx, body.name, role_type, body.description or "")
        access_rows.set_permissions(tx, role_id, permissions)
        row = access_rows.role(tx, role_id)
        assert row is not None
        events.record(
            tx, "role-created", request.ctx.caller.name, {"id": role_id, "name": body.name, "type": role_type}
        )
    return json_response({"version": 1, "roles": access_rows.role_json(row)})


@bp.get("/<role_id:str>")
@openapi.summary("A role and its permissions")
@openapi.tag("Roles")
async def get_role(request: Request, role_id: str) -> HTTPResponse:
    role_number = path_id(role_id, "role")
    with transaction(request) as tx:
        row = access_rows.role(tx, role_number)
        if row is None:
            raise NotFound(f"Could not find role with id {role_number}")
        shown = _detail(tx, row)
    return json_response(shown)


@bp.put("/<role_id:str>")
@openapi.summary("Replace a custom role's name, description and permissions")
@openapi.tag("Roles")
@json_body(RoleBody)
async def update_role(request: Request, role_id: str, body: RoleBody) -> HTTPResponse:
    role_number = path_id(role_id, "role")
    with transaction(request) as tx:
        row = _editable(tx, role_number)
        role_type = row["type"] if body.type is None else _role_type(body)
        if role_type != row["type"] and access_rows.role_in_use(tx, role_number):
            raise ValidationFailed("type", "a role in use cannot change between root and project")
        permissions = _permissions(body, role_type)
        other = access_rows.role_by_name(tx, body.name)
        if other is not None and other["id"] != role_number:
            raise NameExists(f"There already exists a role with the name {body.name}")
        access_rows.update_role(tx, role_number, body.name, role_type, body.description or "")
        access_rows.set_permissions(tx, role_number, permissions)
        updated = access_rows.role(tx, role_number)
        assert updated is not None
        events.record(tx, "role-updated", request.ctx.caller.name, {"id": role_number, "name": body.name})
    return json_response({"version": 1, "roles": access_rows.role_json(updated)})


@bp.delete("/<role_id:str>")
@openapi.summary("Delete a custom role that nobody holds")
@openapi.tag("Roles")
async def delete_role(request: Request, role_id: str) -> HTTPResponse:
    role_number = path_id(role_id, "role")
    with transaction(request) as tx:
        row = _editable(tx, role_number)
        if access_rows.role_in_use(tx, role_number):
            raise NameExists(f"The role {row['name']} is in use: take it from every user and group first")
        access_rows.delete_role(tx, role_number)
        events.record(tx, "role-deleted", request.ctx.caller.name, {"id": role_number, "name": row["name"]})
    return empty(200)
