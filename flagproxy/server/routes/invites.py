"""Invite links (`/api/admin/invite-link/tokens`) and signing up through one (`/invite/:token/...`).

An invite link's secret is shown once, when it is made (in `secret` and `url`); it is stored hashed, so the
listings show everything but it. Signing up needs no API key: the secret in the path is the credential
(decision F6). The new user is a Viewer linked to the link.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from pydantic import ValidationError as PydanticError
from sanic import Blueprint, HTTPResponse, Request
from sanic_ext import openapi

from flagproxy.server.clock import to_iso
from flagproxy.server.errors import NameExists, NotFound, ValidationFailed
from flagproxy.server.identity import passwords
from flagproxy.server.identity.bodies import CreateInviteBody, SignupBody, UpdateInviteBody
from flagproxy.server.identity.permissions import VIEWER_ROLE
from flagproxy.server.routes.common import created, empty, is_digest, json_response, transaction
from flagproxy.server.storage import events, people
from flagproxy.server.storage.database import Row, Tx
from flagproxy.server.validation import as_validation_failed, json_body, nul_location, require_json

bp = Blueprint("invites", url_prefix="/api/admin/invite-link/tokens")
signup = Blueprint("signup", url_prefix="/invite")

MAX_LIFETIME = timedelta(days=31)  # as Unleash: an invite link lasts at most a month


def signup_url(request: Request, secret: str) -> str:
    return f"{request.app.ctx.scheme(request)}://{request.host}/new-user?invite={secret}"


def _invite_json(tx: Tx, row: Row, *, secret: str | None = None, url: str | None = None) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "name": row["name"],
        "expiresAt": row["expires_at"],
        "enabled": bool(row["enabled"]),
        "createdAt": row["created_at"],
        "createdBy": row["created_by"],
        "role": {"id": VIEWER_ROLE, "name": "Viewer", "type": "root"},
        "users": [dict(user) for user in people.invited_users(tx, row["secret_hash"])],
    }
    if secret is not None:
        shown = {"secret": secret, "url": url, **shown}
    return shown


def _capped(moment: datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return to_iso(min(moment, datetime.now(UTC) + MAX_LIFETIME))


@bp.get("")
@openapi.summary("List invite links (without their secrets)")
@openapi.tag("Invite links")
async def list_invites(request: Request) -> HTTPResponse:
    with transaction(request) as tx:
        shown = [_invite_json(tx, row) for row in people.all_invites(tx)]
    return json_response({"tokens": shown})


@bp.post("")
@openapi.summary("Create an invite link; its secret and URL are shown once")
@openapi.tag("Invite links")
@json_body(CreateInviteBody)
async def create_invite(request: Request, body: CreateInviteBody) -> HTTPResponse:
    caller = request.ctx.caller
    with transaction(request) as tx:
        secret, row = people.new_invite(tx, body.name, _capped(body.expiresAt), caller.name)
        shown = _invite_json(tx, row, secret=secret, url=signup_url(request, secret))
        events.record(
            tx, "invite-link-created", caller.name, {"name": body.name, "expiresAt": row["expires_at"]}
        )
    return created(shown, "tokens")


@bp.get("/<secret:str>")
@openapi.summary("An invite link and the users who signed up through it")
@openapi.tag("Invite links")
async def get_invite(request: Request, secret: str) -> HTTPResponse:
    with transaction(request) as tx:
        row = people.invite(tx, secret)
        if row is None:
            raise NotFound("No invite link with that secret")
        shown = _invite_json(tx, row)
    return json_response(shown)


@bp.put("/<secret:str>")
@openapi.summary("Enable, disable or re-date an invite link (named by its secret or the secret's SHA-256)")
@openapi.tag("Invite links")
@json_body(UpdateInviteBody)
async def update_invite(request: Request, secret: str, body: UpdateInviteBody) -> HTTPResponse:
    caller = request.ctx.caller
    with transaction(request) as tx:
        found = people.invite(tx, secret)
        if found is None and is_digest(secret):
            found = people.invite_by_hash(tx, secret)  # the console names a link by its secret's digest
        if found is None:
            raise NotFound("No invite link with that secret")
        changes: dict[str, Any] = {}
        if body.enabled is not None:
            changes["enabled"] = 1 if body.enabled else 0
        if body.expiresAt is not None:
            changes["expires_at"] = _capped(body.expiresAt)
        people.update_invite(tx, str(found["secret_hash"]), changes)
        row = people.invite_by_hash(tx, str(found["secret_hash"]))
        assert row is not None
        events.record(tx, "invite-link-updated", caller.name, {"name": row["name"], **changes})
        shown = _invite_json(tx, row)
    return json_response(shown)


@signup.get("/<secret:str>/validate")
@openapi.summary("200 when the invite link can be used, 400 when not")
@openapi.tag("Invite links")
async def validate_invite(request: Request, secret: str) -> HTTPResponse:
    with request.app.ctx.db.transaction(read_only=True) as tx:
        if people.usable_invite(tx, secret) is None:
            raise ValidationFailed("token", "the invite link is unknown, disabled or expired")
    return empty(200)


def _signup_body(request: Request) -> SignupBody:
    """Unleash's order: 415 for a body that is not JSON, then 400 naming the field."""
    data = require_json(request)
    if not isinstance(data, dict):
        raise ValidationFailed("body", "expected a JSON object")
    found = nul_location(data)
    if found is not None:
        raise ValidationFailed(".".join(str(p) for p in found[0]) or "body", "may not hold the NUL character")
    try:
        return SignupBody.model_validate(data)
    except PydanticError as exc:
        raise as_validation_failed(exc, data) from None


@signup.post("/<secret:str>/signup")
@openapi.summary("Sign up through an invite link: a new Viewer (200 and the User)")
@openapi.tag("Invite links")
@openapi.body({"application/json": SignupBody}, required=True)
async def sign_up(request: Request, secret: str) -> HTTPResponse:
    body = _signup_body(request)
    problem = passwords.weakness(body.password)
    if problem:
        raise ValidationFailed("password", f"the password {problem}")
    with request.app.ctx.db.transaction() as tx:
        invite = people.usable_invite(tx, secret)
        if invite is None:
            raise ValidationFailed("token", "the invite link is unknown, disabled or expired")
        clash = people.taken(tx, body.email, body.username)
        if clash:
            raise NameExists(f"A user with that {clash} already exists")
        user_id = people.insert_user(
            tx,
            name=body.name,
            email=body.email,
            username=body.username,
            password_hash=passwords.hash_password(body.password),
            root_role=VIEWER_ROLE,
            invite_hash=invite["secret_hash"],
        )
        row = people.user(tx, user_id)
        assert row is not None
        events.record(tx, "user-created", "public-signup", {"id": user_id, "email": body.email})
        events.record(
            tx, "public-signup-token-user-added", "public-signup", {"id": user_id, "invite": invite["name"]}
        )
    return HTTPResponse(
        orjson.dumps(people.user_json(row, invite_link=signup_url(request, secret))),
        status=200,
        content_type="application/json; charset=utf-8",
    )
