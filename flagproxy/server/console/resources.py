"""API tokens (create client and frontend tokens: the secret shown once, then never again in the console;
revoke), segments (create with constraint rows, delete) and the event log (paged, older and newer)."""

from __future__ import annotations

from sanic import Blueprint, HTTPResponse, Request

from flagproxy.server.authoring import SINGLE_VALUE_OPERATORS
from flagproxy.server.console.flag import OPERATORS
from flagproxy.server.console.render import html, signed_in
from flagproxy.server.errors import NoAccess
from flagproxy.server.identity.permissions import READ_NEEDS
from flagproxy.server.routes.events import paging
from flagproxy.server.shapes import segment_json
from flagproxy.server.storage import events as event_rows
from flagproxy.server.storage import projects as project_rows
from flagproxy.server.storage import segments as segment_rows
from flagproxy.server.storage import tokens as token_rows
from flagproxy.server.storage.catalog import decode_segment
from flagproxy.tokens import hex_digest

bp = Blueprint("console_resources")
TOKEN_LIST_ROUTE = "api_tokens.list_tokens"  # the admin API's route whose rule the tokens page follows
EVENTS_SHOWN = 100


def _shown(token: dict[str, object]) -> dict[str, object]:
    return {key: value for key, value in token.items() if key != "secret"}


def _masked(secret: str) -> str:
    """Enough of a token to tell it apart (its scope and four characters), never the secret itself."""
    scope, dot, rest = secret.rpartition(".")
    return f"{scope}{dot}{rest[:4]}…" if dot else f"{secret[:4]}…"


@bp.get("/console/tokens")
@signed_in
async def tokens(request: Request) -> HTTPResponse:
    # Who may list tokens is the API's rule for its own list (READ_NEEDS), not a second copy of it.
    permission = READ_NEEDS[TOKEN_LIST_ROUTE].permission
    if permission is not None and not request.ctx.can(permission):
        raise NoAccess(f'You need the "{permission}" permission to see API tokens.')
    with request.app.ctx.db.transaction(read_only=True) as tx:
        # No secret in the page: a masked prefix to tell tokens apart and the digest revoke names it by.
        shown = [
            {**_shown(t.to_json()), "masked": _masked(t.secret), "digest": hex_digest(t.secret)}
            for t in token_rows.all_tokens(tx)
        ]
        environments = project_rows.environments(tx)
        projects = project_rows.projects(tx)
    shown = [t for t in shown if t["type"] != "admin"]
    return await html(request, "tokens.html", tokens=shown, environments=environments, projects=projects)


@bp.get("/console/segments")
@signed_in
async def segments(request: Request) -> HTTPResponse:
    with request.app.ctx.db.transaction(read_only=True) as tx:
        used = segment_rows.usage(tx)
        shown = [
            segment_json(decode_segment(row), used.get(int(row["id"]), []))
            for row in segment_rows.segments(tx)
        ]
        projects = project_rows.projects(tx)
    return await html(
        request,
        "segments.html",
        segments=shown,
        projects=projects,
        operators=OPERATORS,
        single_value=sorted(SINGLE_VALUE_OPERATORS),
    )


@bp.get("/console/events")
@signed_in
async def events(request: Request) -> HTTPResponse:
    """One page of the event log, newest first, with links to the older and newer pages (`offset`, and
    `limit` if one was given: the event search API's paging and its checks)."""
    limit, offset = paging(request, EVENTS_SHOWN)
    with request.app.ctx.db.transaction(read_only=True) as tx:
        shown, total = event_rows.page(tx, limit, offset)
    sized = f"&limit={limit}" if "limit" in request.args else ""
    older = f"?offset={offset + limit}{sized}" if offset + limit < total else None
    newer = f"?offset={max(0, offset - limit)}{sized}" if offset > 0 else None
    return await html(
        request, "events.html", events=shown, total=total, first=offset + 1, older=older, newer=newer
    )
