"""Who may call what on `flagproxy edge`: the token of a request, checked against its route family.

Statuses follow Edge's middleware (crates/oss/unleash-edge/src/middleware/validate_token.rs): no token
401; a token the upstream could not be asked about 401; malformed, unknown, revoked, or of the wrong
type for the route 403. In strict mode a client token that no `--tokens` token covers is 403; a frontend
token no client token covers is 511 with a body saying what to add (older Edge releases' answer: the
instance has no data it could ever serve that token). With `--dynamic` a validated client token's scope
is synced on first use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from flagproxy.edge.scopes import ServedScope
from flagproxy.edge.tokens import ADMIN, CLIENT, FRONTEND, EdgeToken, request_secret
from flagproxy.edge.validation import UpstreamUnavailable


@dataclass
class Refusal:
    status: int
    body: bytes = b""


UNAUTHORIZED = Refusal(401)
FORBIDDEN = Refusal(403)


def not_covered(token: EdgeToken) -> Refusal:
    projects = ",".join(token.projects) or "[]"
    return Refusal(
        511,
        orjson.dumps(
            {
                "explanation": "Edge does not have data for this token. Add a client token with the same "
                f"access to --tokens (TOKENS): environment {token.environment!r}, projects {projects!r}",
                "access": {"environment": token.environment, "project": projects},
            }
        ),
    )


class Gate:
    """Token → the served scope a request reads, with one dict lookup for a token seen before."""

    def __init__(self, edge: Any) -> None:
        self.edge = edge  # flagproxy.edge.app.EdgeApp: validator, scopes, dynamic_feed, settings
        self.passed: dict[tuple[bytes, str], ServedScope] = {}
        self.full_checks = 0  # requests that missed the fast path (shown in /internal-backstage/metrics)

    def fast(self, header: str | None, family: str) -> ServedScope | None:
        """The hot path: a token that passed before and is still known (`Bearer ` or not: the key is
        the secret's, so both forms of one token take this path)."""
        secret = request_secret(header)
        if not secret:
            return None
        key, token, _ = self.edge.validator.cached(secret)
        if token is None:
            return None
        return self.passed.get((key, family))

    async def check(self, header: str | None, family: str) -> ServedScope | Refusal:
        self.full_checks += 1
        secret = request_secret(header)
        if not secret:
            return UNAUTHORIZED
        validator = self.edge.validator
        key, token, refused = validator.cached(secret)
        if token is None:
            if refused or self.edge.offline:
                return FORBIDDEN
            try:
                token = await validator.validate(secret)
            except UpstreamUnavailable:
                return UNAUTHORIZED
            if token is None:
                return FORBIDDEN
        wanted = FRONTEND if family == FRONTEND else CLIENT
        if token.type == ADMIN or (token.type is not None and token.type != wanted):
            return FORBIDDEN
        served = self.edge.scopes.serve(token)
        if served is None:
            if self.edge.offline:
                return FORBIDDEN  # the file has nothing for its environment; no token could add it
            if wanted == FRONTEND:
                return not_covered(token)
            if not self.edge.settings.dynamic:
                return FORBIDDEN
            await self.edge.dynamic_feed(token)
            served = self.edge.scopes.serve(token)
            if served is None:
                return FORBIDDEN
        elif served.current is None and self.edge.settings.dynamic and wanted == CLIENT:
            await self.edge.dynamic_feed(token)  # a feed another request started: wait for its first fetch
        self.passed[(key, family)] = served
        return served
