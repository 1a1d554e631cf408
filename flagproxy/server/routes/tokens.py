"""`/api/admin/api-tokens`: create, list and delete API tokens."""

from __future__ import annotations

from urllib.parse import unquote

from sanic import Blueprint, HTTPResponse, Request
from sanic_ext import openapi

from flagproxy.server.clock import now_iso, to_iso
from flagproxy.server.errors import NotFound, ValidationFailed
from flagproxy.server.routes.common import created, empty, is_digest, json_response, transaction
from flagproxy.server.schemas import CreateTokenBody
from flagproxy.server.storage import events
from flagproxy.server.storage import projects as project_rows
from flagproxy.server.storage import tokens as token_rows
from flagproxy.server.tokens import ALL_PROJECTS, ApiToken, new_secret
from flagproxy.server.validation import json_body

bp = Blueprint("api_tokens", url_prefix="/api/admin/api-tokens")


@bp.get("")
@openapi.summary("List API tokens")
@openapi.tag("API tokens")
async def list_tokens(request: Request) -> HTTPResponse:
    with transaction(request) as tx:
        tokens = token_rows.all_tokens(tx)
    return json_response({"tokens": [token.to_json() for token in tokens]})


@bp.post("")
@openapi.summary("Create a client or frontend token (admin tokens come from INIT_ADMIN_API_TOKENS)")
@openapi.tag("API tokens")
@json_body(CreateTokenBody)
async def create_token(request: Request, body: CreateTokenBody) -> HTTPResponse:
    token_type = body.type.lower()
    if token_type == "backend":  # Unleash's newer name; stored and listed as client
        token_type = "client"
    if token_type not in ("client", "frontend"):
        raise ValidationFailed("type", "must be client, backend or frontend (admin tokens are set at start)")
    name = body.tokenName or body.username
    if not name:
        raise ValidationFailed("tokenName", "is required")
    environment = body.environment or "development"
    projects = (
        tuple(body.projects) if body.projects else ((body.project,) if body.project else (ALL_PROJECTS,))
    )
    if ALL_PROJECTS in projects:
        projects = (ALL_PROJECTS,)
    with transaction(request) as tx:
        if project_rows.environment(tx, environment) is None:
            raise ValidationFailed("environment", f"Environment={environment} does not exist")
        for index, project in enumerate(projects):
            if project != ALL_PROJECTS and project_rows.project(tx, project) is None:
                raise ValidationFailed(f"projects[{index}]", f"Project={project} does not exist")
        token = ApiToken(
            secret=new_secret(projects, environment),
            token_name=name,
            type=token_type,
            environment=environment,
            projects=projects,
            created_at=now_iso(),
            expires_at=to_iso(body.expiresAt) if body.expiresAt else None,
        )
        token_rows.insert(tx, token)
        events.record(
            tx,
            "api-token-created",
            request.ctx.caller.name,
            {"tokenName": name, "type": token_type, "environment": environment, "projects": list(projects)},
        )
    return created(token.to_json(), "api-tokens")


@bp.delete("/<secret:path>")
@openapi.summary("Delete an API token by its secret (or the secret's SHA-256 hex digest)")
@openapi.tag("API tokens")
async def delete_token(request: Request, secret: str) -> HTTPResponse:
    named = unquote(secret)
    with transaction(request) as tx:
        token = token_rows.find(tx, named)
        if token is None and is_digest(named):
            # The console names a token by its digest, so its pages never hold the secret.
            token = token_rows.find_by_hash(tx, named)
        if token is None or not token_rows.delete(tx, token.secret):
            raise NotFound("No API token with that secret")
        events.record(
            tx,
            "api-token-deleted",
            request.ctx.caller.name,
            {"tokenName": token.token_name, "type": token.type},
        )
    return empty(200)
