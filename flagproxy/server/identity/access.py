"""Who a request acts as, and the one permission check every admin route and every console action asks.

    allowed(tx, caller, permission, project, environment) -> bool

An admin API token may do everything. A user (through a personal access token or a browser session) holds
the union of their root role's permissions and, inside a project, those of every project role they hold
there, directly or through a group; an environment permission counts only for its environment (or for every
environment when the role does not name one). ADMIN implies every permission.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flagproxy.server.identity.permissions import ADMIN, BUILT_IN, ENVIRONMENT_PERMISSIONS
from flagproxy.server.storage import access as access_rows
from flagproxy.server.storage.database import Row, Tx
from flagproxy.server.tokens import ApiToken


@dataclass(frozen=True)
class Caller:
    """An admin API token, or a user signed in through a personal access token or a session."""

    token: ApiToken | None = None
    user: Row | None = None
    via: str = "token"  # "token", "personal-token" or "session"
    csrf_hash: str | None = None  # the session's, for the CSRF check of cookie-authenticated changes

    @property
    def name(self) -> str:
        """Who the event log says did it (never a secret)."""
        if self.user is not None:
            return str(self.user["username"] or self.user["email"])
        assert self.token is not None
        return f"admin-token:{self.token.token_name}"

    @property
    def user_id(self) -> int | None:
        return None if self.user is None else int(self.user["id"])


def _holds(granted: list[tuple[str, str | None]], permission: str, environment: str | None) -> bool:
    for name, env in granted:
        if name == ADMIN:
            return True
        if name == permission and (
            permission not in ENVIRONMENT_PERMISSIONS or env is None or env == environment
        ):
            return True
    return False


def allowed(
    tx: Tx, caller: Caller, permission: str, project: str | None = None, environment: str | None = None
) -> bool:
    if caller.user is None:
        return caller.token is not None and caller.token.type == "admin"
    root_role = int(caller.user["root_role"])
    root = access_rows.permissions_of(tx, root_role)
    built_in = BUILT_IN.get(root_role)
    if any(name == ADMIN for name, _ in root):
        return True
    if built_in is not None and built_in.every_project:
        if _holds(root, permission, environment):
            return True
    elif _holds([p for p in root if p[0] not in ENVIRONMENT_PERMISSIONS], permission, environment):
        return True
    if project is None:
        return False
    for held in access_rows.project_roles_of_user(tx, int(caller.user["id"])):
        if held["project"] == project and _holds(
            access_rows.permissions_of(tx, int(held["role_id"])), permission, environment
        ):
            return True
    return False


def permission_names(tx: Tx, caller: Caller) -> list[str]:
    """The root permissions a user holds, as SPEC.md's User `permissions` lists them."""
    if caller.user is None:
        return [ADMIN]
    return sorted({name for name, _ in access_rows.permissions_of(tx, int(caller.user["root_role"]))})


def describe(caller: Caller) -> dict[str, Any]:
    return {"user": caller.user_id, "via": caller.via} if caller.user is not None else {"token": caller.name}
