"""Users, browser sessions, personal access tokens and invite links.

Every secret here (a session id, its CSRF token, a personal access token, an invite link) is stored as
its SHA-256 and looked up by it: the database never holds one, and no comparison on a secret can leak
timing. A secret is shown once, when it is made. Digests and expiry are flagproxy/tokens.py's rules (an
expiry that cannot be read has passed), the same as for API tokens.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime, timedelta
from typing import Any

from flagproxy.server.clock import now_iso, to_iso
from flagproxy.server.storage.database import Row, Tx
from flagproxy.tokens import expired
from flagproxy.tokens import hex_digest as digest

USER_COLUMNS = {"name", "email", "email_key", "username", "password_hash", "root_role"}


# ---- users -----------------------------------------------------------------------------------------


def insert_user(
    tx: Tx,
    *,
    name: str | None,
    email: str,
    username: str | None,
    password_hash: str | None,
    root_role: int,
    invite_hash: str | None = None,
) -> int:
    tx.execute(
        "INSERT INTO users (name, email, email_key, username, password_hash, root_role, login_attempts,"
        " created_at, invite_hash) VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?)",
        (name, email, email.lower(), username, password_hash, root_role, now_iso(), invite_hash),
    )
    return int(tx.value("SELECT id FROM users WHERE email_key = ?", (email.lower(),)))


def user(tx: Tx, user_id: int) -> Row | None:
    return tx.one("SELECT * FROM users WHERE id = ?", (user_id,))


def user_by_login(tx: Tx, login: str) -> Row | None:
    """The user whose email (any case) or username is `login`."""
    return tx.one("SELECT * FROM users WHERE email_key = ? OR username = ?", (login.lower(), login))


def taken(tx: Tx, email: str | None, username: str | None, except_id: int | None = None) -> str | None:
    """Which of `email` (any case) and `username` another user has: "email", "username" or None."""
    if email is not None:
        row = tx.one("SELECT id FROM users WHERE email_key = ?", (email.lower(),))
        if row is not None and row["id"] != except_id:
            return "email"
    if username is not None:
        row = tx.one("SELECT id FROM users WHERE username = ?", (username,))
        if row is not None and row["id"] != except_id:
            return "username"
    return None


def all_users(tx: Tx) -> list[Row]:
    return tx.all("SELECT * FROM users ORDER BY id")


def no_users_yet(tx: Tx) -> bool:
    """Whether nobody has an account yet. On PostgreSQL the users table stays locked against writers until
    the transaction ends, so two instances starting together cannot both create the first admin (SQLite's
    BEGIN IMMEDIATE already serialises them)."""
    if tx.dialect == "postgres":
        tx.execute("LOCK TABLE users IN SHARE ROW EXCLUSIVE MODE")
    return int(tx.value("SELECT COUNT(*) FROM users")) == 0


def update_user(tx: Tx, user_id: int, changes: dict[str, Any]) -> None:
    tx.update("users", ("id", user_id), changes, USER_COLUMNS)


def delete_user(tx: Tx, user_id: int) -> bool:
    return tx.execute("DELETE FROM users WHERE id = ?", (user_id,)) > 0


def login_failed(tx: Tx, user_id: int) -> None:
    tx.execute(
        "UPDATE users SET login_attempts = login_attempts + 1, last_failed_at = ? WHERE id = ?",
        (now_iso(), user_id),
    )


def login_succeeded(tx: Tx, user_id: int, password_hash: str | None = None) -> None:
    tx.execute("UPDATE users SET login_attempts = 0, seen_at = ? WHERE id = ?", (now_iso(), user_id))
    if password_hash is not None:  # rehashed with today's parameters
        tx.execute("UPDATE users SET password_hash = ? WHERE id = ?", (password_hash, user_id))


def user_json(row: Row, *, permissions: list[str] | None = None, invite_link: str = "") -> dict[str, Any]:
    """SPEC.md's User, every field present. No password or hash, ever."""
    email = row["email"] or ""
    return {
        "id": row["id"],
        "isAPI": False,
        "name": row["name"],
        "email": email,
        "username": row["username"],
        "imageUrl": "https://gravatar.com/avatar/"
        + hashlib.sha256(email.strip().lower().encode()).hexdigest()
        + "?s=42&d=retro&r=g",
        "inviteLink": invite_link,
        "loginAttempts": row["login_attempts"],
        "emailSent": False,
        "rootRole": row["root_role"],
        "seenAt": row["seen_at"],
        "createdAt": row["created_at"],
        "accountType": "User",
        "permissions": permissions or [],
        "scimId": None,
    }


# ---- sessions ----------------------------------------------------------------------------------------


def new_session(tx: Tx, user_id: int, lifetime: timedelta) -> tuple[str, str, str]:
    """(session id, CSRF token, expiry) for a fresh session; only their hashes are stored."""
    session_id, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(24)
    expires = to_iso(datetime.now(UTC) + lifetime)
    tx.execute(
        "INSERT INTO sessions (id_hash, csrf_hash, user_id, created_at, expires_at) VALUES (?, ?, ?, ?, ?)",
        (digest(session_id), digest(csrf), user_id, now_iso(), expires),
    )
    return session_id, csrf, expires


def session(tx: Tx, session_id: str) -> Row | None:
    """The live session with this id (an expired one is deleted and not returned)."""
    row = tx.one("SELECT * FROM sessions WHERE id_hash = ?", (digest(session_id),))
    if row is not None and expired(row["expires_at"]):
        return None
    return row


def end_session(tx: Tx, session_id: str) -> None:
    tx.execute("DELETE FROM sessions WHERE id_hash = ?", (digest(session_id),))


# ---- personal access tokens ---------------------------------------------------------------------------

PAT_PREFIX = "user:"


def new_personal_token(tx: Tx, user_id: int, description: str, expires_at: str) -> tuple[str, Row]:
    secret = PAT_PREFIX + secrets.token_hex(28)
    tx.execute(
        "INSERT INTO personal_tokens (secret_hash, user_id, description, expires_at, created_at)"
        " VALUES (?, ?, ?, ?, ?)",
        (digest(secret), user_id, description, expires_at, now_iso()),
    )
    row = tx.one("SELECT * FROM personal_tokens WHERE secret_hash = ?", (digest(secret),))
    assert row is not None
    return secret, row


def personal_token(tx: Tx, secret: str) -> Row | None:
    row = tx.one("SELECT * FROM personal_tokens WHERE secret_hash = ?", (digest(secret),))
    if row is None or expired(row["expires_at"]):
        return None
    return row


def personal_tokens_of(tx: Tx, user_id: int) -> list[Row]:
    return tx.all("SELECT * FROM personal_tokens WHERE user_id = ? ORDER BY id", (user_id,))


def delete_personal_token(tx: Tx, user_id: int, token_id: int) -> bool:
    return tx.execute("DELETE FROM personal_tokens WHERE id = ? AND user_id = ?", (token_id, user_id)) > 0


def personal_token_json(row: Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "description": row["description"],
        "expiresAt": row["expires_at"],
        "createdAt": row["created_at"],
        "seenAt": row["seen_at"],
        "userId": row["user_id"],
    }


# ---- invite links -------------------------------------------------------------------------------------


def new_invite(tx: Tx, name: str, expires_at: str, created_by: str) -> tuple[str, Row]:
    secret = secrets.token_hex(16)
    tx.execute(
        "INSERT INTO invite_links (secret_hash, name, enabled, expires_at, created_by, created_at)"
        " VALUES (?, ?, 1, ?, ?, ?)",
        (digest(secret), name, expires_at, created_by, now_iso()),
    )
    row = invite(tx, secret)
    assert row is not None
    return secret, row


def invite(tx: Tx, secret: str) -> Row | None:
    return tx.one("SELECT * FROM invite_links WHERE secret_hash = ?", (digest(secret),))


def usable_invite(tx: Tx, secret: str) -> Row | None:
    """The invite link if it exists, is enabled and has not expired."""
    row = invite(tx, secret)
    if row is None or not row["enabled"] or expired(row["expires_at"]):
        return None
    return row


def all_invites(tx: Tx) -> list[Row]:
    return tx.all("SELECT * FROM invite_links ORDER BY created_at")


def invite_by_hash(tx: Tx, secret_hash: str) -> Row | None:
    """The invite link whose secret has this SHA-256 hex digest (how the console names one: the server
    keeps only the digest, and the secret is shown once)."""
    return tx.one("SELECT * FROM invite_links WHERE secret_hash = ?", (secret_hash.lower(),))


def update_invite(tx: Tx, secret_hash: str, changes: dict[str, Any]) -> None:
    tx.update("invite_links", ("secret_hash", secret_hash), changes, {"enabled", "expires_at"})


def invited_users(tx: Tx, secret_hash: str) -> list[Row]:
    return tx.all("SELECT id, name, username FROM users WHERE invite_hash = ? ORDER BY id", (secret_hash,))
