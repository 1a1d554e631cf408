"""Groups of users (Unleash's `/api/admin/groups`): a project role given to a group holds for its members."""

from __future__ import annotations

from sanic import Blueprint, HTTPResponse, Request
from sanic_ext import openapi

from flagproxy.server.errors import NameExists, NotFound, ValidationFailed
from flagproxy.server.identity.bodies import GroupBody
from flagproxy.server.routes.common import created, empty, json_response, path_id, transaction
from flagproxy.server.storage import access as access_rows
from flagproxy.server.storage import events, people
from flagproxy.server.storage.database import Tx
from flagproxy.server.validation import json_body

bp = Blueprint("groups", url_prefix="/api/admin/groups")


def _member_ids(tx: Tx, body: GroupBody) -> list[int]:
    ids = [member.user.id for member in body.users]
    for index, user_id in enumerate(ids):
        if people.user(tx, user_id) is None:
            raise ValidationFailed(f"users[{index}].user.id", f"there is no user with id {user_id}")
    return ids


@bp.get("")
@openapi.summary("List groups with their members")
@openapi.tag("Groups")
async def list_groups(request: Request) -> HTTPResponse:
    with transaction(request) as tx:
        groups = [access_rows.group_json(tx, row) for row in access_rows.all_groups(tx)]
    return json_response({"groups": groups})


@bp.post("")
@openapi.summary("Create a group")
@openapi.tag("Groups")
@json_body(GroupBody)
async def create_group(request: Request, body: GroupBody) -> HTTPResponse:
    with transaction(request) as tx:
        if access_rows.group_by_name(tx, body.name) is not None:
            raise NameExists(f"A group named {body.name} already exists")
        ids = _member_ids(tx, body)
        group_id = access_rows.insert_group(tx, body.name, body.description)
        access_rows.set_members(tx, group_id, ids)
        row = access_rows.group(tx, group_id)
        assert row is not None
        shown = access_rows.group_json(tx, row)
        events.record(
            tx, "group-created", request.ctx.caller.name, {"id": group_id, "name": body.name, "users": ids}
        )
    return created(shown, f"groups/{group_id}")


@bp.get("/<group_id:str>")
@openapi.summary("A group")
@openapi.tag("Groups")
async def get_group(request: Request, group_id: str) -> HTTPResponse:
    group_number = path_id(group_id, "group")
    with transaction(request) as tx:
        row = access_rows.group(tx, group_number)
        if row is None:
            raise NotFound(f"Could not find group with id {group_number}")
        shown = access_rows.group_json(tx, row)
    return json_response(shown)


@bp.put("/<group_id:str>")
@openapi.summary("Replace a group's name, description and members")
@openapi.tag("Groups")
@json_body(GroupBody)
async def update_group(request: Request, group_id: str, body: GroupBody) -> HTTPResponse:
    group_number = path_id(group_id, "group")
    with transaction(request) as tx:
        if access_rows.group(tx, group_number) is None:
            raise NotFound(f"Could not find group with id {group_number}")
        other = access_rows.group_by_name(tx, body.name)
        if other is not None and other["id"] != group_number:
            raise NameExists(f"A group named {body.name} already exists")
        ids = _member_ids(tx, body)
        access_rows.update_group(tx, group_number, body.name, body.description)
        access_rows.set_members(tx, group_number, ids)
        row = access_rows.group(tx, group_number)
        assert row is not None
        shown = access_rows.group_json(tx, row)
        events.record(
            tx,
            "group-updated",
            request.ctx.caller.name,
            {"id": group_number, "name": body.name, "users": ids},
        )
    return json_response(shown)


@bp.delete("/<group_id:str>")
@openapi.summary("Delete a group (its project roles end with it)")
@openapi.tag("Groups")
async def delete_group(request: Request, group_id: str) -> HTTPResponse:
    group_number = path_id(group_id, "group")
    with transaction(request) as tx:
        if not access_rows.delete_group(tx, group_number):
            raise NotFound(f"Could not find group with id {group_number}")
        events.record(tx, "group-deleted", request.ctx.caller.name, {"id": group_number})
    return empty(200)
