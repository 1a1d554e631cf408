"""Which token kind each route family needs, and the request middleware that enforces it.

Unknown or missing key -> 401 AuthenticationRequired; a valid token of the wrong kind -> 403
NoAccessError (DESIGN.md "The server"). Authentication runs before routing, as in Unleash, so an
unknown path under /api/admin still answers 401 to a caller without a key.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sanic import Request

from flagproxy.server.errors import AuthenticationRequired, NoAccess
from flagproxy.server.storage import tokens as token_rows
from flagproxy.server.tokens import ApiToken, strip_bearer

# path prefix -> the token type it accepts
ROUTE_FAMILIES: tuple[tuple[str, str], ...] = (
    ("/api/admin", "admin"),
    ("/api/client", "client"),
    ("/api/frontend", "frontend"),
)


def required_token_type(path: str) -> str | None:
    for prefix, token_type in ROUTE_FAMILIES:
        if path == prefix or path.startswith(prefix + "/"):
            return token_type
    return None


def _expired(token: ApiToken) -> bool:
    if not token.expires_at:
        return False
    try:
        expires = datetime.fromisoformat(token.expires_at.replace("Z", "+00:00"))
    except ValueError:
        return False
    return expires <= datetime.now(UTC)


async def authenticate(request: Request) -> None:
    """Request middleware: put the caller's token on `request.ctx.token` or refuse the request."""
    token_type = required_token_type(request.path)
    if token_type is None:
        return
    header = request.headers.get("authorization", "")
    secret = strip_bearer(header)
    if not secret:
        raise AuthenticationRequired(
            "You must log in to use this API. Your request had no authorization header: send an API token"
            " in the Authorization header."
        )
    with request.app.ctx.db.transaction(read_only=True) as tx:
        token = token_rows.find(tx, secret)
    if token is None or _expired(token):
        raise AuthenticationRequired("The API token you sent is unknown or has expired.")
    if token.type != token_type:
        raise NoAccess(
            f"A {token.type} token cannot be used here: {request.path} needs a {token_type} token."
        )
    request.ctx.token = token
