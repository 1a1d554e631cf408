"""API tokens as Unleash has them: kinds, the `<project>:<environment>.<random>` secret format, hashing.

    admin     `*:*.<hex>`                  the admin API, everything
    client    `<project>:<env>.<hex>`      the client API (proxies, server SDKs); `*` = every project,
                                           `[]` = several projects (listed on the token)
    frontend  same format                  the frontend API (/api/frontend)

A `backend` token (Unleash's newer name for client) is stored as `client`, as Unleash lists it. How a
token's text is read, hashed and taken from a header, and when it has expired, is flagproxy/tokens.py's
rule, the same as edge's.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from flagproxy.tokens import ALL_PROJECTS, TokenFormatError, expired, parse_scope

TOKEN_TYPES = ("admin", "client", "frontend")


@dataclass(frozen=True, kw_only=True)
class ApiToken:
    secret: str
    token_name: str
    type: str
    environment: str
    projects: tuple[str, ...]
    created_at: str
    expires_at: str | None = None
    seen_at: str | None = field(default=None, compare=False)

    @property
    def all_projects(self) -> bool:
        return ALL_PROJECTS in self.projects

    @property
    def expired(self) -> bool:
        return expired(self.expires_at)

    def to_json(self) -> dict[str, object]:
        """The token as `GET /api/admin/api-tokens` lists it (Unleash's apiTokenSchema)."""
        projects = list(self.projects)
        return {
            "secret": self.secret,
            "tokenName": self.token_name,
            "username": self.token_name,
            "type": self.type,
            "environment": self.environment,
            "project": projects[0] if len(projects) == 1 else "[]",
            "projects": projects,
            "expiresAt": self.expires_at,
            "createdAt": self.created_at,
            "seenAt": self.seen_at,
            "alias": None,
        }


def new_secret(projects: tuple[str, ...], environment: str) -> str:
    """`<project>:<env>.<56 hex>` as Unleash makes them; several projects show as `[]`."""
    prefix = projects[0] if len(projects) == 1 else "[]"
    return f"{prefix}:{environment}.{secrets.token_hex(28)}"


def parse_init_token(secret: str, token_type: str) -> tuple[tuple[str, ...], str]:
    """Read the projects and environment out of an INIT_*_API_TOKENS entry such as `default:development.x`.

    Raises ValueError with a message fit for the operator when the entry is not in Unleash's format.
    """
    try:
        projects, environment = parse_scope(secret)
    except TokenFormatError:
        raise ValueError(
            f"{token_type} token {secret!r} is not in the form <project>:<environment>.<secret>"
        ) from None
    if not projects:
        raise ValueError(f"{token_type} token {secret!r}: `[]` cannot say which projects it covers")
    if token_type == "admin":
        return (ALL_PROJECTS,), "*"
    if environment == "*":
        raise ValueError(f"{token_type} token {secret!r} must name one environment")
    return projects, environment
