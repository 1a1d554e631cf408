"""API token rows."""

from __future__ import annotations

import orjson

from flagproxy.server.clock import now_iso
from flagproxy.server.storage.database import Row, Tx
from flagproxy.server.tokens import ApiToken
from flagproxy.tokens import hex_digest as secret_hash


def _token(row: Row) -> ApiToken:
    return ApiToken(
        secret=row["secret"],
        token_name=row["token_name"],
        type=row["type"],
        environment=row["environment"],
        projects=tuple(orjson.loads(row["projects"])),
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        seen_at=row["seen_at"],
    )


def insert(tx: Tx, token: ApiToken) -> bool:
    """Store a token; False when a token with this secret exists already (also when another worker or
    instance stores the same INIT token at the same moment)."""
    return (
        tx.execute(
            "INSERT INTO api_tokens (secret_hash, secret, token_name, type, environment, projects,"
            " created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (secret_hash) DO NOTHING",
            (
                secret_hash(token.secret),
                token.secret,
                token.token_name,
                token.type,
                token.environment,
                orjson.dumps(list(token.projects)).decode(),
                token.created_at,
                token.expires_at,
            ),
        )
        > 0
    )


def find(tx: Tx, secret: str) -> ApiToken | None:
    row = tx.one("SELECT * FROM api_tokens WHERE secret_hash = ?", (secret_hash(secret),))
    return None if row is None else _token(row)


def find_by_hash(tx: Tx, digest: str) -> ApiToken | None:
    """The token whose secret has this SHA-256 hex digest (how the console names a token to revoke, so
    its pages never hold the secret)."""
    row = tx.one("SELECT * FROM api_tokens WHERE secret_hash = ?", (digest.lower(),))
    return None if row is None else _token(row)


def all_tokens(tx: Tx) -> list[ApiToken]:
    return [_token(row) for row in tx.all("SELECT * FROM api_tokens ORDER BY created_at, token_name")]


def delete(tx: Tx, secret: str) -> bool:
    return tx.execute("DELETE FROM api_tokens WHERE secret_hash = ?", (secret_hash(secret),)) > 0


def mark_seen(tx: Tx, secret: str) -> None:
    tx.execute("UPDATE api_tokens SET seen_at = ? WHERE secret_hash = ?", (now_iso(), secret_hash(secret)))
