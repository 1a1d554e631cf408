"""Rendering console pages: sanic-ext's Jinja2 environment pointed at the console's templates, who is signed
in, and the headers every page carries.

Content-Security-Policy: scripts, styles and requests only from this server and no inline script or style
(htmx is configured through a meta tag, its indicator styles turned off, and never evaluates attribute
code), no framing. The session cookie is HttpOnly; the CSRF cookie is readable by the console's own
script, which copies it into X-CSRF-Token on every request the admin API checks (flagproxy/server/auth.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import wraps
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, select_autoescape
from sanic import HTTPResponse, Request
from sanic.response import redirect
from sanic_ext import render

from flagproxy import __version__
from flagproxy.server.auth import session_caller
from flagproxy.server.errors import ApiError
from flagproxy.server.identity.access import Caller, allowed
from flagproxy.server.identity.permissions import ROUTE_NEEDS
from flagproxy.server.routes.common import json_response

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}


def use_console_templates(environment: Environment) -> None:
    """Point sanic-ext's Jinja2 environment (`app.ext.environment`, made by its templating extension) at
    the console's templates, package data, escaping everything."""
    environment.loader = PackageLoader("flagproxy.server.console", "templates")
    environment.autoescape = select_autoescape(default=True, default_for_string=True)
    environment.trim_blocks = True
    environment.lstrip_blocks = True


async def html(request: Request, template: str, status: int = 200, **context: Any) -> HTTPResponse:
    """A page or fragment; `caller` (when signed in) and `may` (whether the admin API would take a call
    to the route of that name) are always there. Templates ask `may`, never a permission by name, so
    what a page offers follows ROUTE_NEEDS."""
    caller: Caller | None = getattr(request.ctx, "console_caller", None)
    return await render(
        template,
        status=status,
        headers=dict(SECURITY_HEADERS),
        app=request.app,
        context={
            "caller": caller,
            "version": __version__,
            "path": request.path,
            "may": getattr(request.ctx, "may", None),
            **context,
        },
    )


def login_redirect(request: Request) -> HTTPResponse:
    target = "/console/login?next=" + quote(request.path, safe="/")
    if request.headers.get("hx-request"):
        # htmx follows HX-Redirect with a full page load; a 302 would be swapped into the fragment.
        return HTTPResponse(status=401, headers={"hx-redirect": target, **SECURITY_HEADERS})
    response = redirect(target)
    response.headers.update(SECURITY_HEADERS)
    return response


Page = Callable[..., Awaitable[HTTPResponse]]


def signed_in(handler: Page) -> Page:
    """A page for a signed-in person: resolves the session (else the login page) and puts on the request
    `console_caller`, `can(permission, project=None, environment=None)`, the admin API's own check, and
    `may(route, project=None, environment=None)`: whether the admin API would let this person call the
    route of that name (`features.feature_on`), by its entry in ROUTE_NEEDS. Pages offer an action
    when `may` says so, so what a page offers and what the API allows are one rule."""

    @wraps(handler)
    async def page(request: Request, *args: Any, **kwargs: Any) -> HTTPResponse:
        db = request.app.ctx.db
        with db.transaction(read_only=True) as tx:
            caller = session_caller(tx, request)
        if caller is None:
            return login_redirect(request)

        answers: dict[tuple[str, str | None, str | None], bool] = {}

        def can(permission: str, project: str | None = None, environment: str | None = None) -> bool:
            # A flag table asks the same few questions once per row: ask the database once each.
            key = (permission, project, environment)
            if key not in answers:
                with db.transaction(read_only=True) as tx:
                    answers[key] = allowed(tx, caller, permission, project, environment)
            return answers[key]

        def may(route: str, project: str | None = None, environment: str | None = None) -> bool:
            need = ROUTE_NEEDS[route]  # a KeyError for a route name that does not exist: a bug
            if need.permission is None:
                return caller.user is not None or need.any_caller
            return can(
                need.permission,
                project if need.project else None,
                environment if need.environment else None,
            )

        request.ctx.console_caller = caller
        request.ctx.can = can
        request.ctx.may = may
        return await handler(request, *args, **kwargs)

    return page


async def error_page(request: Request, error: ApiError) -> HTTPResponse:
    """A console URL that names nothing (or is refused) gets a page, not the API's JSON record; an htmx
    fragment request gets the record, whose message console.js shows beside the form."""
    if request.headers.get("hx-request"):
        return json_response({"name": error.name, "message": error.message}, status=error.status)
    return await html(request, "error.html", status=error.status, message=error.message)
