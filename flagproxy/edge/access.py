"""Who may call what on `flagproxy edge`: the token of a request, checked against its route family.

Statuses follow Edge's middleware (crates/oss/unleash-edge/src/middleware/validate_token.rs): no token
401; a token the upstream could not be asked about 401; malformed, unknown, revoked, or of the wrong
type for the route 403. In strict mode a client token that no `--tokens` token covers is 403; a frontend
token no client token covers is 511 with a body saying what to add (older Edge releases' answer: the
instance has no data it could ever serve that token). With `--dynamic` a validated client token's scope
is synced on first use.
"""

from __future__ import annotations

from collections.abc import Callable
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


# The gate remembers, per route family, the Authorization headers exactly as they arrived for tokens that
# passed (`Gate.fast_for`). Bounded: a caller with one valid token could send it with endless whitespace.
REMEMBERED_HEADERS = 4096  # per family; the oldest goes first
LONGEST_REMEMBERED = 512  # characters of a header worth remembering (tokens are far shorter)

Remembered = tuple[bytes, EdgeToken, ServedScope]  # (the token's key, the token as known, its scope)


class Gate:
    """Token → the served scope a request reads, with one dict lookup for a header seen before.

    The hot path looks the header up as it arrived, in a dict keyed by that string, and takes the answer
    while the validator still holds the very token object it was remembered with: a revalidation that
    revokes or replaces the token sends the header the long way again (the digest's, then a full check).
    Looking a secret up by the string itself compares no secret bytes a guess could time: the dict finds
    its slot by the string's hash (SipHash-1-3 under a key drawn at random when the process starts, so
    an outsider can neither compute it nor steer it), and compares a stored header's bytes only with a
    presented one whose 64-bit hash is equal, which a guess that is not the header hits 1 time in 2**64.
    That is the SHA-256 digest's property (its dict does the same with the digest's hash), without a
    SHA-256 per request; `python -m benchmarks.key_timing` times it beside the proxy's KeyRing. A header
    not remembered yet takes the digest's way (`look_up`), which remembers it."""

    def __init__(self, edge: Any) -> None:
        self.edge = edge  # flagproxy.edge.app.EdgeApp: validator, scopes, dynamic_feed, settings
        self.passed: dict[tuple[bytes, str], ServedScope] = {}
        self.remembered: dict[str, dict[str, Remembered]] = {}  # family → header → what it passed as
        self.by_family: dict[str, Callable[[str | None], ServedScope | None]] = {}
        self.full_checks = 0  # requests that missed the fast path (shown in /internal-backstage/metrics)

    def fast_for(self, family: str) -> Callable[[str | None], ServedScope | None]:
        """`fast` for one family, as a route binds it once: header → scope, or None (check in full)."""
        remembered = self.remembered.setdefault(family, {})
        known = self.edge.validator.known  # the validator's dict of valid tokens (never replaced)
        look_up = self.look_up

        def fast(header: str | None) -> ServedScope | None:
            entry = remembered.get(header)  # type: ignore[arg-type]  # None is never a key: a miss
            if entry is not None and known.get(entry[0]) is entry[1]:
                return entry[2]
            return look_up(header, family)

        return fast

    def fast(self, header: str | None, family: str) -> ServedScope | None:
        """The hot path: a token that passed before and is still known."""
        found = self.by_family.get(family)
        if found is None:
            found = self.by_family[family] = self.fast_for(family)
        return found(header)

    def look_up(self, header: str | None, family: str) -> ServedScope | None:
        """A header not remembered: by the secret's digest (`Bearer ` or not: the key is the secret's, so
        both forms of one token find what either passed as), remembered when it has passed."""
        secret = request_secret(header)
        if not secret:
            return None
        key, token, _ = self.edge.validator.cached(secret)
        if token is None:
            return None
        served = self.passed.get((key, family))
        if served is not None:
            self._remember(family, header, key, served)
        return served

    def _remember(self, family: str, header: str | None, key: bytes, served: ServedScope) -> None:
        token = self.edge.validator.known.get(key)
        if token is None or header is None or len(header) > LONGEST_REMEMBERED:
            return
        remembered = self.remembered.setdefault(family, {})
        if header not in remembered and len(remembered) >= REMEMBERED_HEADERS:
            del remembered[next(iter(remembered))]
        remembered[header] = (key, token, served)

    def _forget(self, family: str, key: bytes) -> None:
        """The token of `key` now reads another scope in `family`: every header of it goes the long way."""
        remembered = self.remembered.get(family, {})
        for header in [h for h, entry in remembered.items() if entry[0] == key]:
            del remembered[header]

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
        previous = self.passed.get((key, family))
        if previous is not None and previous is not served:
            self._forget(family, key)
        self.passed[(key, family)] = served
        self._remember(family, header, key, served)
        return served
