"""Tokens as Edge keeps them: what a token's text states, what the upstream said, how it may be used.

A token's text says its environment and (unless `[]`) its project (flagproxy/tokens.py reads it, the
same rule as the server's); the upstream's answer to `/edge/validate` says its type and its full project
list. Secrets are never logged or shown whole (`masked`). The token cache is keyed by the SHA-256 digest
of the secret (`token_key`), so finding a token is a hash lookup and never a comparison of secret bytes
(the gate in flagproxy/edge/access.py remembers the headers that passed, with the same property).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from flagproxy.tokens import ALL_PROJECTS, digest, parse_scope, strip_bearer

# The shared rules, named as edge's modules know them (explicit re-exports).
from flagproxy.tokens import TokenFormatError as TokenFormatError
from flagproxy.tokens import masked as masked

token_key = digest  # the key of edge's token cache: the secret's SHA-256

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
    projects, environment = parse_scope(text)
    return EdgeToken(secret=text.strip(), environment=environment, projects=projects)


def request_secret(header: str | None) -> str:
    """The token of a request's Authorization header (`Bearer ` or not); "" when there is none."""
    return strip_bearer(header) if header else ""


def parse_pretrusted(text: str) -> EdgeToken:
    """A PRETRUSTED_TOKENS entry, trusted as a frontend token without asking the upstream: a full token
    (its own scope; `[]` as every project), or a Node proxy's key as `<key>@<environment>`, which callers
    keep sending as `Authorization: <key>` (the secret is the text before the last `@`, as Edge's
    `parse_legacy_token` keys it) and which reads every project of that environment."""
    try:
        token = parse_token(text)
    except TokenFormatError:
        secret, at, environment = text.strip().rpartition("@")
        if not (at and secret and environment):
            raise TokenFormatError("neither a token nor <secret>@<environment>") from None
        token = EdgeToken(secret=secret, environment=environment, projects=(ALL_PROJECTS,))
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
