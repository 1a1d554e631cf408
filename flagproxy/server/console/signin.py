"""Signing in and up: the login page, the signup page an invite link points to (Unleash's
`/new-user?invite=<secret>`), the console's static files, and HTML error pages.

The forms post JSON to the admin API's own routes (`/auth/simple/login`, `/invite/<secret>/signup`,
`/logout`); these pages only render them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from sanic import Blueprint, HTTPResponse, Request
from sanic.response import redirect

from flagproxy.server.console.render import SECURITY_HEADERS, html, signed_in
from flagproxy.server.storage import people

STATIC = Path(__file__).parent / "static"
TOKEN_DAYS = 30  # what the personal token form proposes

bp = Blueprint("console")
bp.static("/console/static", str(STATIC), name="static")


@bp.on_response
async def security_headers(request: Request, response: HTTPResponse) -> None:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    if request.path.startswith("/console/static/"):
        # Files named by version (htmx) or changed only with a release: a short cache is enough.
        response.headers["cache-control"] = "public, max-age=300"


def _safe_next(target: str | None) -> str:
    """Only a path inside the console: a login link must not send people to another site."""
    if target and target.startswith("/console/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/console/projects"


@bp.get("/console")
async def home(request: Request) -> HTTPResponse:
    return redirect("/console/projects")


@bp.get("/console/login")
async def login_page(request: Request) -> HTTPResponse:
    return await html(request, "login.html", next=_safe_next(request.args.get("next")))


@bp.get("/console/me")
@signed_in
async def me(request: Request) -> HTTPResponse:
    """The signed-in person and their personal access tokens (made, listed and deleted through
    `/api/admin/user/tokens`; a new one's secret is shown once)."""
    user_id = request.ctx.console_caller.user_id
    with request.app.ctx.db.transaction(read_only=True) as tx:
        tokens = [people.personal_token_json(row) for row in people.personal_tokens_of(tx, user_id)]
    expires = (datetime.now(UTC) + timedelta(days=TOKEN_DAYS)).strftime("%Y-%m-%dT%H:%M")
    return await html(request, "me.html", tokens=tokens, token_expires=expires)


@bp.get("/new-user")
async def signup_page(request: Request) -> HTTPResponse:
    secret = request.args.get("invite", "")
    with request.app.ctx.db.transaction(read_only=True) as tx:
        usable = bool(secret) and people.usable_invite(tx, secret) is not None
    return await html(request, "signup.html", status=200 if usable else 400, secret=secret, usable=usable)
