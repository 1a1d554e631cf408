"""API tokens as Unleash has them: kinds, the `<project>:<environment>.<random>` secret format, hashing.

    admin     `*:*.<hex>`                  the admin API, everything
    client    `<project>:<env>.<hex>`      the client API (proxies, server SDKs); `*` = every project,
                                           `[]` = several projects (listed on the token)
    frontend  same format                  the frontend API (/api/frontend)

A `backend` token (Unleash's newer name for client) is stored as `client`, as Unleash lists it.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field

TOKEN_TYPES = ("admin", "client", "frontend")
ALL_PROJECTS = "*"


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

    def allows_project(self, project: str) -> bool:
        return self.all_projects or project in self.projects

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


def secret_hash(secret: str) -> str:
    """Tokens are looked up by this hash, so no comparison on the secret itself can leak timing."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def strip_bearer(header: str) -> str:
    """Unleash accepts `Authorization: <secret>` and `Authorization: Bearer <secret>`."""
    header = header.strip()
    if header[:7].lower() == "bearer ":
        return header[7:].strip()
    return header


def new_secret(projects: tuple[str, ...], environment: str) -> str:
    """`<project>:<env>.<56 hex>` as Unleash makes them; several projects show as `[]`."""
    prefix = projects[0] if len(projects) == 1 else "[]"
    return f"{prefix}:{environment}.{secrets.token_hex(28)}"


def parse_init_token(secret: str, token_type: str) -> tuple[tuple[str, ...], str]:
    """Read the projects and environment out of an INIT_*_API_TOKENS entry such as `default:development.x`.

    Raises ValueError with a message fit for the operator when the entry is not in Unleash's format.
    """
    scope, dot, rest = secret.partition(".")
    project, colon, environment = scope.partition(":")
    if not (dot and colon and project and environment and rest):
        raise ValueError(f"{token_type} token {secret!r} is not in the form <project>:<environment>.<secret>")
    if project == "[]":
        raise ValueError(f"{token_type} token {secret!r}: `[]` cannot say which projects it covers")
    if token_type == "admin":
        return (ALL_PROJECTS,), "*"
    if environment == "*":
        raise ValueError(f"{token_type} token {secret!r} must name one environment")
    return (project,), environment
