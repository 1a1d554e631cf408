"""Unleash API tokens as the server and edge both read them: one rule for each question.

    `<project>:<environment>.<secret>`   one project (`*` = every project, `[]` = a list the upstream keeps)
    `*:*.<secret>`                       an admin token

- `parse_scope` reads the project and environment a token's text states (Edge's `from_trimmed_str`).
- `digest` is the SHA-256 tokens and other secrets are stored and looked up by: finding one is a hash
  lookup, never a comparison of secret bytes that could leak timing.
- `strip_bearer` takes `Authorization: <secret>` and `Authorization: Bearer <secret>` alike, as Unleash does.
- `expired` is the one expiry rule, and it fails closed: no expiry never expires; an expiry that cannot
  be read counts as passed, so a damaged row can never make a credential live for ever.
- `masked` shows enough of a token to recognise it in a log, never enough to use it.

Neither the server nor edge is imported here, so both can import it.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

ALL_PROJECTS = "*"
NO_PROJECT = "[]"  # several projects, listed with the token rather than in its text


class TokenFormatError(ValueError):
    """Not `<project>:<environment>.<secret>`."""


def parse_scope(text: str) -> tuple[tuple[str, ...], str]:
    """(projects, environment) a token states: `()` for `[]`, `("*",)` for every project."""
    scope, dot, rest = text.strip().partition(".")
    project, colon, environment = scope.partition(":")
    if not (dot and colon and project and environment and rest) or ":" in environment:
        raise TokenFormatError("not <project>:<environment>.<secret>")
    return (() if project == NO_PROJECT else (project,)), environment


def digest(secret: str) -> bytes:
    # surrogatepass: any str encodes (a lone surrogate from a JSON escape too), and valid UTF-8 as UTF-8.
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).digest()


def hex_digest(secret: str) -> str:
    """`digest` as the 64 hex digits the server's tables keep."""
    return digest(secret).hex()


def strip_bearer(header: str) -> str:
    """The secret of an Authorization header, with or without the `Bearer ` scheme (any case)."""
    if header[:7].lower() == "bearer ":
        return header[7:].strip()
    return header.strip()


def expired(moment: str | None, now: datetime | None = None) -> bool:
    """Whether a stored ISO 8601 expiry has passed. None or "" never expires; an expiry that cannot be
    read has passed (fail closed); one without a UTC offset is UTC, as the server writes them."""
    if not moment:
        return False
    try:
        when = datetime.fromisoformat(moment.strip())
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return when <= (now or datetime.now(UTC))
    except (ValueError, TypeError, OverflowError, AttributeError):
        return True


def masked(secret: str) -> str:
    """`default:development.****` for a token (its scope, never its secret part), `****` for anything
    else: a Node proxy's key is all secret."""
    scope, dot, _ = secret.partition(".")
    return f"{scope}.****" if dot and ":" in scope else "****"
