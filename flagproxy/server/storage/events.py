"""The event log: who changed what, when. Callers pass data without secrets (a token's id, never its
secret; a user's fields, never a password or hash); `record` drops any key that names one anyway."""

from __future__ import annotations

from typing import Any

import orjson

from flagproxy.server.clock import now_iso
from flagproxy.server.storage.database import Tx

_SECRET_KEYS = ("password", "secret", "hash", "token")


def _clean(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _clean(v) for k, v in data.items() if not any(s in k.lower() for s in _SECRET_KEYS)}
    if isinstance(data, list):
        return [_clean(item) for item in data]
    return data


def record(
    tx: Tx, event_type: str, created_by: str, data: dict[str, Any], project: str | None = None
) -> None:
    tx.execute(
        "INSERT INTO events (type, created_by, created_at, project, data) VALUES (?, ?, ?, ?, ?)",
        (event_type, created_by, now_iso(), project, orjson.dumps(_clean(data)).decode()),
    )


def page(tx: Tx, limit: int, offset: int) -> tuple[list[dict[str, Any]], int]:
    rows = tx.all("SELECT * FROM events ORDER BY id DESC LIMIT ? OFFSET ?", (limit, offset))
    total = int(tx.value("SELECT COUNT(*) FROM events"))
    return [
        {
            "id": row["id"],
            "type": row["type"],
            "createdBy": row["created_by"],
            "createdAt": row["created_at"],
            "project": row["project"],
            "data": orjson.loads(row["data"]),
        }
        for row in rows
    ], total
