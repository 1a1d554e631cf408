"""Which tokens this edge accepts: a cache of the upstream's answers, negative ones included.

A token is looked up by its SHA-256 digest (flagproxy/edge/tokens.py); a request whose header passed
before is found by the header itself (flagproxy/edge/access.py), still only while the token is here. A
token seen for the first time is asked about with `POST <upstream>/edge/validate`; concurrent requests
with the same new token wait for the same answer (single flight), and every new token of one event-loop
turn goes in one upstream call, so a storm of random tokens costs the upstream one look at each token at
most. A token the upstream does not list is cached as invalid: asking again would cost the upstream, never
change the answer until the next revalidation. When the upstream cannot be reached, or answers anything
but a 200 listing the valid tokens, nothing is cached and the request gets 401, as Edge answers an unknown
validation status; a revalidation then keeps every token as it is.

Every `--token-revalidation-interval-seconds` all validated tokens are asked about again; a token the
upstream no longer lists (revoked, expired) stops working then. Pretrusted tokens are never asked about.
The cache of invalid tokens is bounded (oldest out first) so made-up tokens cannot grow the memory.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import orjson

from flagproxy.edge.tokens import (
    INVALID,
    RESTORED,
    TRUSTED,
    VALIDATED,
    EdgeToken,
    TokenFormatError,
    masked,
    parse_token,
    token_key,
)

MAX_INVALID = 100_000  # remembered refusals; about 100 bytes each
BATCH = 500  # tokens in one /edge/validate call


class UpstreamUnavailable(Exception):
    """The upstream could not say whether the tokens are valid (network trouble, 5xx)."""


class TokenValidator:
    def __init__(self, client: Any, logger: Any, trusted: Iterable[EdgeToken] = ()) -> None:
        self.client = client  # an UpstreamClient whose URL is the upstream's base URL (no /api)
        self.logger = logger
        self.known: dict[bytes, EdgeToken] = {}
        self.invalid: OrderedDict[bytes, None] = OrderedDict()
        # Tokens being asked about (a second request for one waits for the same answer), and those of them
        # not sent yet.
        self.waiting: dict[bytes, tuple[str, asyncio.Future[EdgeToken | None]]] = {}
        self.unsent: dict[bytes, tuple[str, asyncio.Future[EdgeToken | None]]] = {}
        self.flush_scheduled = False
        self.flushing: set[asyncio.Task[None]] = set()  # held so they are not collected mid-flight
        self.upstream_calls = 0
        self.failing: str | None = None  # the last failure said, so a retry each second says it once
        self.on_change: Callable[[], None] | None = None  # the set of valid tokens changed (backup)
        self.on_revoked: Callable[[], None] | None = None  # a revalidation refused a known token
        for token in trusted:
            self.known[token_key(token.secret)] = token

    # ---- the request side -----------------------------------------------------------------------------

    def cached(self, secret: str) -> tuple[bytes, EdgeToken | None, bool]:
        """(key, the token if known valid, whether it is known invalid): no I/O, the hot path's check."""
        key = token_key(secret)
        token = self.known.get(key)
        if token is not None and token.status == RESTORED:
            # Known from the backup by its hash alone; now that its secret is here, the next
            # revalidation can ask about it.
            token = self.known[key] = replace(token, secret=secret, status=VALIDATED)
        return key, token, key in self.invalid

    # ---- the backup: hashes and scopes, never secrets ---------------------------------------------------

    def saved(self) -> list[dict[str, Any]]:
        """Validated tokens as --backup-folder keeps them: the SHA-256 of the secret and the scope."""
        return [
            {"key": key.hex(), "type": t.type, "environment": t.environment, "projects": list(t.projects)}
            for key, t in self.known.items()
            if t.status in (VALIDATED, RESTORED)
        ]

    def restore(self, saved: Any) -> int:
        """Take `saved()`'s list back (at start, before the upstream answers); how many were taken."""
        taken = 0
        for entry in saved if isinstance(saved, list) else ():
            try:
                key = bytes.fromhex(entry["key"])
                token = EdgeToken(
                    secret="",
                    environment=str(entry["environment"]),
                    projects=tuple(str(p) for p in entry["projects"]),
                    type=str(entry["type"]),
                    status=RESTORED,
                )
            except (KeyError, TypeError, ValueError):
                continue
            self.known.setdefault(key, token)
            taken += 1
        return taken

    async def validate(self, secret: str) -> EdgeToken | None:
        """The validated token, or None when the upstream says it is not valid (or it is malformed);
        raises UpstreamUnavailable when nobody could say."""
        key, token, refused = self.cached(secret)
        if token is not None:
            return token
        if refused:
            return None
        try:
            parse_token(secret)
        except TokenFormatError:
            return None  # not a token at all: nothing to ask the upstream
        entry = self.waiting.get(key)
        if entry is None:
            entry = self.waiting[key] = (secret, asyncio.get_running_loop().create_future())
            self.unsent[key] = entry
            if not self.flush_scheduled:
                # Every new token of this loop turn goes in the same upstream call.
                self.flush_scheduled = True
                asyncio.get_running_loop().call_soon(self._start_flush)
        return await asyncio.shield(entry[1])

    def _start_flush(self) -> None:
        self.flush_scheduled = False
        pending, self.unsent = self.unsent, {}
        self.flushing.add(asyncio.get_running_loop().create_task(self._flush(pending)))

    async def _flush(self, pending: dict[bytes, tuple[str, asyncio.Future[EdgeToken | None]]]) -> None:
        try:
            await self._answer(list(pending.items()))
        finally:
            self.flushing.discard(asyncio.current_task())  # type: ignore[arg-type]

    async def _answer(self, batch: list[tuple[bytes, tuple[str, asyncio.Future[EdgeToken | None]]]]) -> None:
        for start in range(0, len(batch), BATCH):
            chunk = batch[start : start + BATCH]
            try:
                answers = await self.ask([secret for _, (secret, _) in chunk])
            except Exception as exc:  # UpstreamUnavailable, or a bug: nobody may wait for ever
                for key, (_, future) in chunk:
                    self.waiting.pop(key, None)
                    if not future.done():
                        future.set_exception(exc)
                continue
            for key, (_, future) in chunk:
                token = answers.get(key)
                if token is None:
                    self._remember_invalid(key)
                else:
                    self.known[key] = token
                self.waiting.pop(key, None)
                if not future.done():
                    future.set_result(token)
        if self.on_change is not None and any(key in self.known for key, _ in batch):
            self.on_change()

    # ---- the upstream side ----------------------------------------------------------------------------

    async def ask(self, secrets: list[str]) -> dict[bytes, EdgeToken]:
        """The upstream's answer for `secrets`: key → validated token, for the valid ones only."""
        self.upstream_calls += 1
        answer = await self.client.exchange("edge/validate", {"tokens": secrets})
        # Only a 200 listing the valid tokens says anything about them. Any other answer (5xx, 429, or a
        # 401/404 from something in front of the upstream) says nothing: taking it as "none is valid"
        # made the next revalidation turn every validated token away.
        if isinstance(answer, str) or answer[0] != 200:
            reason = answer if isinstance(answer, str) else f"answered {answer[0]}"
            if reason != self.failing:
                self.logger.warn(f"Validating {len(secrets)} token(s) upstream failed: {reason}")
                self.failing = reason
            raise UpstreamUnavailable(reason)
        self.failing = None
        body = answer[1]
        try:
            listed = orjson.loads(body)["tokens"]
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise UpstreamUnavailable(f"unreadable /edge/validate answer: {exc}") from None
        asked = {token_key(secret): secret for secret in secrets}
        valid: dict[bytes, EdgeToken] = {}
        for entry in listed if isinstance(listed, list) else ():
            if not isinstance(entry, dict) or not isinstance(entry.get("token"), str):
                continue
            key = token_key(entry["token"])
            if key not in asked:
                continue  # the upstream may only confirm what was asked
            try:
                parsed = parse_token(asked[key])
            except TokenFormatError:
                continue
            projects = tuple(p for p in entry.get("projects") or () if isinstance(p, str))
            environment = entry.get("environment") if isinstance(entry.get("environment"), str) else None
            valid[key] = parsed.with_answer(str(entry.get("type") or ""), projects, environment)
        return valid

    def _remember_invalid(self, key: bytes) -> None:
        self.invalid[key] = None
        while len(self.invalid) > MAX_INVALID:
            self.invalid.popitem(last=False)

    async def revalidate(self) -> int:
        """Ask about every validated token again; return how many stopped being valid."""
        tokens = [(key, t) for key, t in self.known.items() if t.status == VALIDATED]
        revoked = 0
        for start in range(0, len(tokens), BATCH):
            chunk = tokens[start : start + BATCH]
            try:
                answers = await self.ask([t.secret for _, t in chunk])
            except UpstreamUnavailable:
                return revoked  # keep what is known; try again next interval
            for key, token in chunk:
                if key in answers:
                    self.known[key] = answers[key]
                else:
                    del self.known[key]
                    self._remember_invalid(key)
                    revoked += 1
                    self.logger.info(f"Token {masked(token.secret)} is no longer valid upstream")
        if self.on_change is not None:
            self.on_change()
        if revoked and self.on_revoked is not None:
            self.on_revoked()
        return revoked

    async def run_revalidation(self, interval_seconds: int) -> None:
        while True:
            await asyncio.sleep(interval_seconds)
            try:
                await self.revalidate()
            except Exception as exc:  # a bug here must not end revalidation for good
                self.logger.error(f"Revalidating tokens failed unexpectedly: {exc!r}")

    def tokens(self) -> list[EdgeToken]:
        return list(self.known.values())

    def trust(self, token: EdgeToken) -> None:
        self.known[token_key(token.secret)] = replace(token, status=TRUSTED)


__all__ = ["INVALID", "TokenValidator", "UpstreamUnavailable"]
