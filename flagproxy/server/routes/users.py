"""Users (Unleash's `/api/admin/user-admin`), signing in and out, the signed-in user, and their personal
access tokens (`/api/admin/user/tokens`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sanic import Blueprint, HTTPResponse, Request
from sanic_ext import openapi

from flagproxy.server.auth import CSRF_COOKIE, SESSION_COOKIE, check_csrf, session_caller
from flagproxy.server.clock import to_iso
from flagproxy.server.errors import (
    AuthenticationRequired,
    NameExists,
    NotFound,
    TooManyAttempts,
    ValidationFailed,
)
from flagproxy.server.identity import passwords
from flagproxy.server.identity.access import Caller, describe, permission_names
from flagproxy.server.identity.bodies import (
    CreatePersonalTokenBody,
    CreateUserBody,
    LoginBody,
    UpdateUserBody,
)
from flagproxy.server.identity.permissions import PROJECT_TYPES
from flagproxy.server.routes.common import created, empty, json_response, path_id, transaction
from flagproxy.server.storage import access as access_rows
from flagproxy.server.storage import events, people
from flagproxy.server.storage.database import Tx
from flagproxy.server.validation import json_body

bp = Blueprint("users", url_prefix="/api/admin/user-admin")
me = Blueprint("me", url_prefix="/api/admin/user")
personal = Blueprint("personal_tokens", url_prefix="/api/admin/user/tokens")
signin = Blueprint("signin")

SESSION_LIFETIME = timedelta(hours=48)
FREE_ATTEMPTS = 5  # failed sign-ins before each next one waits: 2, 4, 8 ... seconds, at most 5 minutes
MAX_WAIT_SECONDS = 300


def _caller(request: Request) -> Caller:
    return request.ctx.caller  # type: ignore[no-any-return]


def _root_role(tx: Tx, wanted: int | str) -> int:
    """The id of the root role `wanted` names, by id or by name."""
    role = access_rows.role(tx, wanted) if isinstance(wanted, int) else access_rows.role_by_name(tx, wanted)
    if role is None or role["type"] in PROJECT_TYPES:
        raise ValidationFailed(
            "rootRole",
            f'{wanted!r} is not a root role (1 or "Admin", 2 or "Editor", 3 or "Viewer", '
            "or a custom root role's id or name)",
        )
    return int(role["id"])


def _check_password(password: str | None) -> None:
    if password is None:
        return
    problem = passwords.weakness(password)
    if problem:
        raise ValidationFailed("password", f"the password {problem}")


def _unique(tx: Tx, email: str | None, username: str | None, except_id: int | None = None) -> None:
    clash = people.taken(tx, email, username, except_id)
    if clash == "email":
        raise NameExists("A user with that email already exists")
    if clash == "username":
        raise NameExists("A user with that username already exists")


def _user_or_404(tx: Tx, user_id: int) -> dict[str, object]:
    row = people.user(tx, user_id)
    if row is None:
        raise NotFound(f"Could not find user with id {user_id}")
    return row


@bp.get("")
@openapi.summary("List users")
@openapi.tag("Users")
async def list_users(request: Request) -> HTTPResponse:
    with transaction(request) as tx:
        users = [people.user_json(row) for row in people.all_users(tx)]
    return json_response({"users": users})


@bp.post("")
@openapi.summary("Create a user")
@openapi.tag("Users")
@json_body(CreateUserBody)
async def create_user(request: Request, body: CreateUserBody) -> HTTPResponse:
    _check_password(body.password)
    with transaction(request) as tx:
        root_role = _root_role(tx, body.rootRole)
        _unique(tx, body.email, body.username)
        user_id = people.insert_user(
            tx,
            name=body.name,
            email=body.email,
            username=body.username,
            password_hash=passwords.hash_password(body.password) if body.password else None,
            root_role=root_role,
        )
        row = _user_or_404(tx, user_id)
        events.record(tx, "user-created", _caller(request).name, {"id": user_id, "email": body.email})
    return created(people.user_json(row), f"user-admin/{user_id}")


@bp.get("/<user_id:str>")
@openapi.summary("A user")
@openapi.tag("Users")
async def get_user(request: Request, user_id: str) -> HTTPResponse:
    user_number = path_id(user_id, "user")
    with transaction(request) as tx:
        row = _user_or_404(tx, user_number)
    return json_response(people.user_json(row))


@bp.put("/<user_id:str>")
@openapi.summary("Update a user (name, email, username, rootRole)")
@openapi.tag("Users")
@json_body(UpdateUserBody)
async def update_user(request: Request, user_id: str, body: UpdateUserBody) -> HTTPResponse:
    user_number = path_id(user_id, "user")
    with transaction(request) as tx:
        _user_or_404(tx, user_number)
        root_role = None if body.rootRole is None else _root_role(tx, body.rootRole)
        _unique(tx, body.email, body.username, except_id=user_number)
        changes: dict[str, object] = {}
        if body.email is not None:
            changes.update(email=body.email, email_key=body.email.lower())
        if body.name is not None:
            changes["name"] = body.name
        if body.username is not None:
            changes["username"] = body.username
        if root_role is not None:
            changes["root_role"] = root_role
        people.update_user(tx, user_number, changes)
        row = _user_or_404(tx, user_number)
        shown = {k: v for k, v in changes.items() if k != "email_key"}
        events.record(tx, "user-updated", _caller(request).name, {"id": user_number, **shown})
    return json_response(people.user_json(row))


@bp.delete("/<user_id:str>")
@openapi.summary("Delete a user (their sessions and personal access tokens end with them)")
@openapi.tag("Users")
async def delete_user(request: Request, user_id: str) -> HTTPResponse:
    user_number = path_id(user_id, "user")
    with transaction(request) as tx:
        if not people.delete_user(tx, user_number):
            raise NotFound(f"Could not find user with id {user_number}")
        events.record(tx, "user-deleted", _caller(request).name, {"id": user_number})
    return empty(200)


@me.get("")
@openapi.summary("The signed-in user (or the admin token) and their root permissions")
@openapi.tag("Users")
async def current_user(request: Request) -> HTTPResponse:
    caller = _caller(request)
    with transaction(request) as tx:
        permissions = permission_names(tx, caller)
    if caller.user is None:
        return json_response({"user": None, "token": caller.name, "permissions": permissions})
    return json_response({"user": people.user_json(caller.user, permissions=permissions)})


# ---- signing in and out --------------------------------------------------------------------------------


def _wait_left(row: dict[str, object]) -> int:
    attempts = int(row["login_attempts"] or 0)  # type: ignore[call-overload]
    if attempts < FREE_ATTEMPTS or not row["last_failed_at"]:
        return 0
    wait = min(2 ** (attempts - FREE_ATTEMPTS + 1), MAX_WAIT_SECONDS)
    last = datetime.fromisoformat(str(row["last_failed_at"]).replace("Z", "+00:00"))
    left = (last + timedelta(seconds=wait) - datetime.now(UTC)).total_seconds()
    return max(0, int(left + 0.999))


@signin.post("/auth/simple/login")
@openapi.summary("Sign in with an email or username and a password; sets the session cookie")
@openapi.tag("Sign-in")
@json_body(LoginBody)
async def login(request: Request, body: LoginBody) -> HTTPResponse:
    with request.app.ctx.db.transaction() as tx:
        row = people.user_by_login(tx, body.username)
        if row is not None and _wait_left(row):
            raise TooManyAttempts(
                f"Too many failed sign-ins for this account: try again in {_wait_left(row)} seconds."
            )
        hashed = row["password_hash"] if row is not None else None
        if not passwords.verify(hashed, body.password):
            if row is not None:
                people.login_failed(tx, int(row["id"]))
                events.record(tx, "user-login-failed", "anonymous", {"id": row["id"]})
            failed = True
        else:
            assert row is not None
            failed = False
            rehash = passwords.hash_password(body.password) if passwords.needs_rehash(str(hashed)) else None
            people.login_succeeded(tx, int(row["id"]), rehash)
            session_id, csrf, expires = people.new_session(tx, int(row["id"]), SESSION_LIFETIME)
            row = people.user(tx, int(row["id"]))
            assert row is not None
            permissions = permission_names(tx, Caller(user=row, via="session"))
    if failed:
        # One answer for an unknown user and a wrong password: nothing says which part was wrong.
        raise AuthenticationRequired("The username or password is wrong.")
    assert row is not None  # the signed-in user's row, read again after the session was made
    response = json_response(people.user_json(row, permissions=permissions))
    secure = request.app.ctx.scheme(request) == "https"
    max_age = int(SESSION_LIFETIME.total_seconds())
    response.add_cookie(
        SESSION_COOKIE, session_id, httponly=True, samesite="Lax", secure=secure, max_age=max_age
    )
    response.add_cookie(CSRF_COOKIE, csrf, httponly=False, samesite="Lax", secure=secure, max_age=max_age)
    response.headers["x-session-expires"] = expires
    return response


@signin.post("/logout")
@openapi.summary("End the session of the cookie sent")
@openapi.tag("Sign-in")
async def logout(request: Request) -> HTTPResponse:
    session_id = request.cookies.get(SESSION_COOKIE)
    if session_id:
        with request.app.ctx.db.transaction() as tx:
            caller = session_caller(tx, request)
            if caller is not None:
                check_csrf(request, caller)  # another site's page cannot sign a person out
            people.end_session(tx, session_id)
    response = empty(200)
    response.delete_cookie(SESSION_COOKIE)
    response.delete_cookie(CSRF_COOKIE)
    return response


# ---- personal access tokens ----------------------------------------------------------------------------


@personal.get("")
@openapi.summary("The signed-in user's personal access tokens (never their secrets)")
@openapi.tag("Personal access tokens")
async def list_tokens(request: Request) -> HTTPResponse:
    caller = _caller(request)
    assert caller.user_id is not None
    with transaction(request) as tx:
        rows = people.personal_tokens_of(tx, caller.user_id)
    return json_response({"pats": [people.personal_token_json(row) for row in rows]})


@personal.post("")
@openapi.summary("Create a personal access token; its secret is shown once")
@openapi.tag("Personal access tokens")
@json_body(CreatePersonalTokenBody)
async def create_token(request: Request, body: CreatePersonalTokenBody) -> HTTPResponse:
    caller = _caller(request)
    assert caller.user_id is not None
    if body.expiresAt.tzinfo is not None and body.expiresAt <= datetime.now(UTC):
        raise ValidationFailed("expiresAt", "must be in the future")
    with transaction(request) as tx:
        secret, row = people.new_personal_token(tx, caller.user_id, body.description, to_iso(body.expiresAt))
        events.record(tx, "pat-created", caller.name, {"id": row["id"], "description": body.description})
    return created({**people.personal_token_json(row), "secret": secret}, f"tokens/{row['id']}")


@personal.delete("/<token_id:str>")
@openapi.summary("Delete one of the signed-in user's personal access tokens")
@openapi.tag("Personal access tokens")
async def delete_token(request: Request, token_id: str) -> HTTPResponse:
    token_number = path_id(token_id, "personal access token")
    caller = _caller(request)
    assert caller.user_id is not None
    with transaction(request) as tx:
        if not people.delete_personal_token(tx, caller.user_id, token_number):
            raise NotFound(f"You have no personal access token with id {token_number}")
        events.record(tx, "pat-deleted", caller.name, {"id": token_number, **describe(caller)})
    return empty(200)
