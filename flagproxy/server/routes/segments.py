"""Segments: create, list, read, delete, and SPEC.md's `PUT /api/admin/segments/:id` where fields left out
of the body stay as they are.

SPEC.md lists every status that PUT may answer: 204; 400, 401, 403, 409, 415. So an id that names no
segment is a 400 ValidationError naming `id` there (as Unleash answers an id that is not a number), while
GET and DELETE, which SPEC.md does not define, answer it with Unleash's 404.
"""

from __future__ import annotations

from typing import Any

from sanic import Blueprint, HTTPResponse, Request
from sanic_ext import openapi

from flagproxy.server import authoring
from flagproxy.server.errors import NameExists, NotFound, ValidationFailed
from flagproxy.server.routes.common import changing, created, empty, json_response, transaction
from flagproxy.server.schemas import SegmentBody, SegmentUpdateBody
from flagproxy.server.shapes import segment_json
from flagproxy.server.storage import projects as project_rows
from flagproxy.server.storage import segments as segment_rows
from flagproxy.server.storage.catalog import decode_segment
from flagproxy.server.storage.database import Tx
from flagproxy.server.validation import json_body

bp = Blueprint("segments", url_prefix="/api/admin/segments")


def _segment(tx: Tx, segment_id: str) -> dict[str, Any] | None:
    # SPEC.md types the path id as a string: one that is not a number (ASCII digits) names no segment.
    if not (segment_id.isascii() and segment_id.isdigit() and len(segment_id) < 19):
        return None
    row = segment_rows.segment(tx, int(segment_id))
    return None if row is None else decode_segment(row)


def _require(tx: Tx, segment_id: str) -> dict[str, Any]:
    segment = _segment(tx, segment_id)
    if segment is None:
        raise NotFound(f'No segment exists with ID "{segment_id}"')
    return segment


def _check_project(tx: Tx, project: str | None) -> None:
    if project is not None and project_rows.project(tx, project) is None:
        raise ValidationFailed("project", f"Project={project} does not exist")


@bp.get("")
@openapi.summary("List segments")
@openapi.tag("Segments")
async def list_segments(request: Request) -> HTTPResponse:
    with transaction(request) as tx:
        rows = segment_rows.segments(tx)
        used = segment_rows.usage(tx)
    shaped = [segment_json(decode_segment(row), used.get(int(row["id"]), [])) for row in rows]
    return json_response({"segments": shaped})


@bp.post("")
@openapi.summary("Create a segment")
@openapi.tag("Segments")
@json_body(SegmentBody)
async def create_segment(request: Request, body: SegmentBody) -> HTTPResponse:
    constraints = authoring.constraints(body.constraints)
    with transaction(request) as tx:
        _check_project(tx, body.project)
        if segment_rows.by_name(tx, body.name) is not None:
            raise NameExists("Segment name already exists")
        row = segment_rows.insert(
            tx, name=body.name, description=body.description, project=body.project, constraints=constraints
        )
    segment = decode_segment(row)
    return created(segment_json(segment), f"segments/{segment['id']}")


@bp.get("/<segment_id>")
@openapi.summary("Read a segment")
@openapi.tag("Segments")
async def get_segment(request: Request, segment_id: str) -> HTTPResponse:
    with transaction(request) as tx:
        segment = _require(tx, segment_id)
    return json_response(segment_json(segment))


@bp.put("/<segment_id>")
@openapi.summary("Update a segment; fields left out stay unchanged (204; 400, 401, 403, 409, 415)")
@openapi.description("An id that names no segment is a 400 ValidationError naming `id`.")
@openapi.tag("Segments")
@openapi.response(204, description="updated")
@json_body(SegmentUpdateBody)
async def update_segment(request: Request, segment_id: str, body: SegmentUpdateBody) -> HTTPResponse:
    given = body.model_fields_set
    for required in ("name", "constraints"):
        if required in given and getattr(body, required) is None:
            raise ValidationFailed(required, "may be left out but not null")
    changes: dict[str, Any] = {}
    if "constraints" in given and body.constraints is not None:
        changes["constraints"] = authoring.constraints(body.constraints)
    with changing(request) as tx:
        segment = _segment(tx, segment_id)
        if segment is None:
            raise ValidationFailed("id", f"no segment has the id {segment_id!r}")
        if "name" in given and body.name != segment["name"]:
            if segment_rows.by_name(tx, body.name or "") is not None:
                raise NameExists("Segment name already exists")
            changes["name"] = body.name
        if "description" in given:
            changes["description"] = body.description
        if "project" in given:
            _check_project(tx, body.project)
            if body.project is not None:
                elsewhere = sorted(
                    {project for _, project in segment_rows.usage(tx).get(segment["id"], [])} - {body.project}
                )
                if elsewhere:
                    raise ValidationFailed(
                        "project",
                        "Invalid project. Segment is being used by strategies in other projects: "
                        + ", ".join(elsewhere),
                    )
            changes["project"] = body.project
        segment_rows.update(tx, segment["id"], changes)
    return empty(204)


@bp.delete("/<segment_id>")
@openapi.summary("Delete a segment that no strategy uses")
@openapi.tag("Segments")
async def delete_segment(request: Request, segment_id: str) -> HTTPResponse:
    with changing(request) as tx:
        segment = _require(tx, segment_id)
        users = segment_rows.usage(tx).get(segment["id"], [])
        if users:
            raise NameExists(
                "Segment is used by strategies of "
                + ", ".join(sorted({f for f, _ in users}))
                + "; remove it there first"
            )
        segment_rows.delete(tx, segment["id"])
    return empty(200)
