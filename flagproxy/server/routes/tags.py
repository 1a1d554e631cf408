"""Feature tags: `/api/admin/features/:name/tags`."""

from __future__ import annotations

from urllib.parse import unquote

from sanic import Blueprint, HTTPResponse, Request
from sanic_ext import openapi

from flagproxy.server.errors import NotFound
from flagproxy.server.routes.common import changing, created, empty, json_response, transaction
from flagproxy.server.schemas import TagBody
from flagproxy.server.storage import features as feature_rows
from flagproxy.server.storage.database import Tx
from flagproxy.server.validation import json_body

bp = Blueprint("tags", url_prefix="/api/admin/features/<name>/tags")


def _require(tx: Tx, name: str) -> None:
    if feature_rows.feature(tx, name) is None:
        raise NotFound(f"Could not find feature {name}")


@bp.get("")
@openapi.summary("List a feature's tags")
@openapi.tag("Tags")
async def list_tags(request: Request, name: str) -> HTTPResponse:
    with transaction(request) as tx:
        _require(tx, name)
        rows = feature_rows.tags_of(tx, name)
    return json_response(
        {"version": 1, "tags": [{"value": r["tag_value"], "type": r["tag_type"]} for r in rows]}
    )


@bp.post("")
@openapi.summary("Tag a feature")
@openapi.tag("Tags")
@json_body(TagBody)
async def add_tag(request: Request, name: str, body: TagBody) -> HTTPResponse:
    with changing(request) as tx:  # tags filter what the client API serves
        _require(tx, name)
        feature_rows.add_tag(tx, name, body.type, body.value)
    return created({"value": body.value, "type": body.type}, f"{name}/tags")


@bp.delete("/<tag_type>/<value>")
@openapi.summary("Remove a tag from a feature (type and value percent-encoded)")
@openapi.tag("Tags")
async def remove_tag(request: Request, name: str, tag_type: str, value: str) -> HTTPResponse:
    # Tag types and values may hold any character (spaces, slashes), so they arrive percent-encoded;
    # Sanic hands path parameters over undecoded.
    tag_type, value = unquote(tag_type), unquote(value)
    with changing(request) as tx:
        _require(tx, name)
        # No stored tag holds a NUL (bodies with one are refused), and PostgreSQL cannot even compare one.
        if "\x00" not in tag_type + value:
            feature_rows.remove_tag(tx, name, tag_type, value)
    return empty(200)
