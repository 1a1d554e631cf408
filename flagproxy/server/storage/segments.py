"""Segment rows."""

from __future__ import annotations

from typing import Any

import orjson

from flagproxy.server.clock import now_iso
from flagproxy.server.storage.database import Row, Tx


def segment(tx: Tx, segment_id: int) -> Row | None:
    return tx.one("SELECT * FROM segments WHERE id = ?", (segment_id,))


def by_name(tx: Tx, name: str) -> Row | None:
    return tx.one("SELECT * FROM segments WHERE name = ?", (name,))


def segments(tx: Tx) -> list[Row]:
    return tx.all("SELECT * FROM segments ORDER BY id")


def insert(
    tx: Tx, *, name: str, description: str | None, project: str | None, constraints: list[dict[str, Any]]
) -> Row:
    new_id = tx.value(
        "INSERT INTO segments (name, description, project, constraints, created_by, created_at)"
        " VALUES (?, ?, ?, ?, 'admin', ?) RETURNING id",
        (name, description, project, orjson.dumps(constraints).decode(), now_iso()),
    )
    row = segment(tx, int(new_id))
    assert row is not None
    return row


def update(tx: Tx, segment_id: int, changes: dict[str, Any]) -> None:
    """`changes` maps column names to new values (constraints as a list)."""
    if "constraints" in changes:
        changes = {**changes, "constraints": orjson.dumps(changes["constraints"]).decode()}
    tx.update("segments", ("id", segment_id), changes, {"name", "description", "project", "constraints"})


def delete(tx: Tx, segment_id: int) -> None:
    tx.execute("DELETE FROM segments WHERE id = ?", (segment_id,))


def usage(tx: Tx) -> dict[int, list[tuple[str, str]]]:
    """segment id -> [(feature, project)] of the strategies that reference it."""
    used: dict[int, list[tuple[str, str]]] = {}
    rows = tx.all(
        "SELECT s.segments, f.name, f.project FROM strategies s JOIN features f ON f.name = s.feature_name"
        " WHERE s.segments <> '[]'"
    )
    for row in rows:
        for segment_id in orjson.loads(row["segments"]):
            used.setdefault(int(segment_id), []).append((row["name"], row["project"]))
    return used
