"""Unleash tokens as Edge reads them: `project:environment.secret`, `*:env.secret`, `[]:env.secret`.

A token's text says its environment and (unless `[]`) its project; the upstream's answer to
`/edge/validate` says its type and its full project list. Secrets are never logged or shown whole:
`masked()` keeps what is before the dot. The token cache is keyed by a SHA-256 digest of the secret
(`token_key`), so finding a token is a hash lookup and never a comparison of secret bytes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

ALL_PROJECTS = "*"
# Validation states, Edge's names.
VALIDATED = "validated"
INVALID = "invalid"
TRUSTED = "trusted"
RESTORED = "restored"  # read back from --backup-folder: known by its hash until its secret is seen
# Token types as the upstream names them; Edge's "backend" is Unleash's "client".
CLIENT = "client"
FRONTEND = "frontend"
ADMIN = "admin"
_TYPE_NAMES = {"client": CLIENT, "backend": CLIENT, "frontend": FRONTEND, "admin": ADMIN}


class TokenFormatError(ValueError):
    """Not `<project>:<environment>.<secret>` (nor, where allowed, `<secret>@<environment>`)."""


def token_key(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8", "surrogateescape")).digest()


def masked(secret: str) -> str:
    """`default:development.****`: enough to recognise a token in a log, not to use it."""
    scope, dot, _ = secret.partition(".")
    if dot and ":" in scope:
        return f"{scope}.****"
    at = secret.rfind("@")
    return f"****@{secret[at + 1 :]}" if at > 0 else "****"


@dataclass(frozen=True)
class EdgeToken:
    secret: str
    environment: str
    projects: tuple[str, ...]  # sorted; ("*",) for every project; () until the upstream says for `[]`
    type: str | None = None  # client, frontend, admin; None until validated
    status: str = "unknown"

    @property
    def all_projects(self) -> bool:
        return ALL_PROJECTS in self.projects

    @property
    def scope(self) -> tuple[str, tuple[str, ...]]:
        """Which snapshot serves this token: its environment and project set."""
        return (self.environment, (ALL_PROJECTS,) if self.all_projects else self.projects)

    def covers(self, other: EdgeToken) -> bool:
        """Same environment and at least `other`'s projects (Edge's `subsumes`, without the type)."""
        if self.environment != other.environment:
            return False
        return self.all_projects or (not other.all_projects and set(other.projects) <= set(self.projects))

    def with_answer(self, token_type: str, projects: tuple[str, ...], environment: str | None) -> EdgeToken:
        return replace(
            self,
            type=_TYPE_NAMES.get(token_type, token_type),
            projects=tuple(sorted(set(projects))) or self.projects,
            environment=environment or self.environment,
            status=VALIDATED,
        )

    def describe(self) -> dict[str, object]:
        """What /internal-backstage/tokens shows: everything but the secret."""
        return {
            "token": masked(self.secret),
            "type": self.type,
            "environment": self.environment,
            "projects": list(self.projects),
            "status": self.status,
        }


def parse_token(text: str) -> EdgeToken:
    """Edge's `from_trimmed_str`: the environment and project a token's text states."""
    secret = text.strip()
    scope, dot, rest = secret.partition(".")
    project, colon, environment = scope.partition(":")
    if not (dot and colon and project and environment and rest) or ":" in environment:
        raise TokenFormatError("not <project>:<environment>.<secret>")
    projects: tuple[str, ...] = () if project == "[]" else (project,)
    return EdgeToken(secret=secret, environment=environment, projects=projects)


def parse_pretrusted(text: str) -> EdgeToken:
    """A PRETRUSTED_TOKENS entry: a full token, or a legacy Node-proxy key `secret@environment`, both
    trusted as frontend tokens for every project of their environment without asking the upstream."""
    try:
        token = parse_token(text)
    except TokenFormatError:
        secret, at, environment = text.strip().rpartition("@")
        if not (at and secret and environment):
            raise TokenFormatError("neither a token nor <secret>@<environment>") from None
        token = EdgeToken(secret=text.strip(), environment=environment, projects=(ALL_PROJECTS,))
    projects = token.projects or (ALL_PROJECTS,)
    return replace(token, projects=projects, type=FRONTEND, status=TRUSTED)


def parse_offline(text: str) -> EdgeToken:
    """An offline-mode token: an Unleash token, `<secret>@<environment>`, or any other string (Edge takes
    any), which reads the `default` environment of a map of environments, or the single document."""
    try:
        return parse_token(text)
    except TokenFormatError:
        secret, at, environment = text.strip().rpartition("@")
        if at and secret and environment:
            return EdgeToken(secret=text.strip(), environment=environment, projects=(ALL_PROJECTS,))
        if not text.strip():
            raise TokenFormatError("empty") from None
        return EdgeToken(secret=text.strip(), environment="default", projects=(ALL_PROJECTS,))
