"""Who may call what: the request middleware that resolves the caller and asks the one permission check.

Unleash's order (reference F16): 401 AuthenticationRequired for a missing or unknown credential, 403
NoAccessError for a valid one without the permission (client and frontend tokens on the admin API
included), then the route's own 415, 400 and handler. Authentication runs before the route's handler, so
an unknown path under /api/admin still answers 401 to a caller without a key.

Credentials on /api/admin: an admin API token or a personal access token (`user:…`) in Authorization, or
the session cookie a login set. A request authenticated by the cookie that changes something (any method
but GET, HEAD, OPTIONS) must also carry the session's CSRF token in X-CSRF-Token (double submit, checked
against the hash stored with the session): a page on another site can make the browser send the cookie but
cannot read the CSRF cookie to copy it into a header.
"""

from __future__ import annotations

from sanic import Request

from flagproxy.server.errors import AuthenticationRequired, NoAccess
from flagproxy.server.identity.access import Caller, allowed
from flagproxy.server.identity.permissions import READ_NEEDS, ROUTE_NEEDS, Need
from flagproxy.server.storage import features as feature_rows
from flagproxy.server.storage import people
from flagproxy.server.storage import tokens as token_rows
from flagproxy.server.storage.database import Tx
from flagproxy.tokens import hex_digest, strip_bearer

SESSION_COOKIE = "flagproxy_session"
CSRF_COOKIE = "flagproxy_csrf"
CSRF_HEADER = "x-csrf-token"
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")

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


def route_name(request: Request) -> str | None:
    """`features.create_feature` for the route the request matched (the app's name stripped)."""
    route = getattr(request, "route", None)
    if route is None:
        return None
    return route.name.split(".", 1)[1] if "." in route.name else route.name


def route_need(request: Request) -> Need | None:
    """What the matched route needs beyond a valid credential (None: nothing more)."""
    name = route_name(request)
    if name is None:
        return None
    if request.method in SAFE_METHODS:
        return READ_NEEDS.get(name)
    return ROUTE_NEEDS.get(name, Need("ADMIN"))  # create_app refuses routes missing here; never open


def _scope(tx: Tx, request: Request, source: str | None) -> str | None:
    if source is None:
        return None
    kind, _, param = source.partition(":")
    value = request.match_info.get(param)
    if value is None:
        return None
    if kind == "feature":
        feature = feature_rows.feature(tx, str(value))
        return None if feature is None else str(feature["project"])
    return str(value)


def session_caller(tx: Tx, request: Request) -> Caller | None:
    """The user of the request's session cookie (None: no cookie, or a session that has ended). The admin
    API and the console both sign people in through this one function."""
    session_id = request.cookies.get(SESSION_COOKIE)
    if not session_id:
        return None
    session = people.session(tx, session_id)
    user = None if session is None else people.user(tx, int(session["user_id"]))
    if session is None or user is None:
        return None
    return Caller(user=user, via="session", csrf_hash=session["csrf_hash"])


def _admin_caller(tx: Tx, request: Request) -> Caller:
    secret = strip_bearer(request.headers.get("authorization", ""))
    if secret:
        if secret.startswith(people.PAT_PREFIX):
            token = people.personal_token(tx, secret)
            user = None if token is None else people.user(tx, int(token["user_id"]))
            if user is None:
                raise AuthenticationRequired("The personal access token you sent is unknown or has expired.")
            return Caller(user=user, via="personal-token")
        api_token = token_rows.find(tx, secret)
        if api_token is None or api_token.expired:
            raise AuthenticationRequired("The API token you sent is unknown or has expired.")
        if api_token.type != "admin":
            raise NoAccess(
                f"A {api_token.type} token cannot be used here: {request.path} needs an admin token, "
                "a personal access token or a signed-in session."
            )
        return Caller(token=api_token)
    if request.cookies.get(SESSION_COOKIE):
        caller = session_caller(tx, request)
        if caller is None:
            raise AuthenticationRequired("Your session has ended: sign in again at /auth/simple/login.")
        return caller
    raise AuthenticationRequired(
        "You must log in to use this API. Your request had no authorization header: send an API token or a"
        " personal access token in the Authorization header, or sign in at /auth/simple/login."
    )


def check_csrf(request: Request, caller: Caller) -> None:
    """A change made with the session cookie must carry the session's CSRF token (also `/logout`)."""
    if caller.via != "session" or request.method in SAFE_METHODS:
        return
    presented = request.headers.get(CSRF_HEADER, "")
    if not presented or hex_digest(presented) != caller.csrf_hash:
        raise NoAccess(
            f"A change made with a session cookie must carry the session's CSRF token in {CSRF_HEADER}"
            f" (the {CSRF_COOKIE} cookie set at sign-in)."
        )


async def authenticate(request: Request) -> None:
    """Request middleware: put the caller on `request.ctx` (`token` for the client and frontend APIs,
    `caller` for the admin API) or refuse the request."""
    token_type = required_token_type(request.path)
    if token_type is None:
        return
    if token_type == "admin":
        with request.app.ctx.db.transaction(read_only=True) as tx:
            caller = _admin_caller(tx, request)
            check_csrf(request, caller)
            need = route_need(request)
            if need is not None:
                if need.permission is None:
                    if caller.user is None and not need.any_caller:
                        raise NoAccess("This route acts for a user: use a personal access token or sign in.")
                else:
                    project = _scope(tx, request, need.project)
                    environment = _scope(tx, request, need.environment)
                    if not allowed(tx, caller, need.permission, project, environment):
                        raise NoAccess(
                            "You don't have the required permissions to perform this operation. To perform"
                            f' this action, you need the "{need.permission}" permission'
                            + (f' in project "{project}"' if project else "")
                            + (f' for environment "{environment}"' if environment else "")
                            + "."
                        )
        request.ctx.caller = caller
        request.ctx.token = caller.token
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
    if token is None or token.expired:
        raise AuthenticationRequired("The API token you sent is unknown or has expired.")
    if token.type != token_type:
        raise NoAccess(
            f"A {token.type} token cannot be used here: {request.path} needs a {token_type} token."
        )
    request.ctx.token = token
