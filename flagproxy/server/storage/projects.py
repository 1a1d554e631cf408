"""Project and environment rows."""

from __future__ import annotations

from flagproxy.server.clock import now_iso
from flagproxy.server.storage.database import Row, Tx


def project(tx: Tx, project_id: str) -> Row | None:
    return tx.one("SELECT * FROM projects WHERE id = ?", (project_id,))


def projects(tx: Tx) -> list[Row]:
    return tx.all(
        "SELECT p.*, (SELECT COUNT(*) FROM features f WHERE f.project = p.id AND f.archived = 0)"
        " AS feature_count FROM projects p ORDER BY p.created_at, p.id"
    )


def insert_project(tx: Tx, project_id: str, name: str, description: str | None) -> Row:
    tx.execute(
        "INSERT INTO projects (id, name, description, created_at) VALUES (?, ?, ?, ?)",
        (project_id, name, description, now_iso()),
    )
    row = project(tx, project_id)
    assert row is not None
    return row


def environment(tx: Tx, name: str) -> Row | None:
    return tx.one("SELECT * FROM environments WHERE name = ?", (name,))


def environments(tx: Tx) -> list[Row]:
    return tx.all("SELECT * FROM environments ORDER BY sort_order, name")


def insert_environment(tx: Tx, name: str, env_type: str, sort_order: int, enabled: bool) -> Row:
    tx.execute(
        "INSERT INTO environments (name, type, sort_order, enabled, protected, created_at)"
        " VALUES (?, ?, ?, ?, 0, ?)",
        (name, env_type, sort_order, int(enabled), now_iso()),
    )
    row = environment(tx, name)
    assert row is not None
    return row


def set_environment_enabled(tx: Tx, name: str, enabled: bool) -> bool:
    return tx.execute("UPDATE environments SET enabled = ? WHERE name = ?", (int(enabled), name)) > 0


def update_project(tx: Tx, project_id: str, changes: dict[str, str | None]) -> None:
    """`changes`: `name` and/or `description`."""
    tx.update("projects", ("id", project_id), changes, {"name", "description"})


def feature_names(tx: Tx, project_id: str, *, archived: bool) -> list[str]:
    sql = "SELECT name FROM features WHERE project = ? AND archived = ? ORDER BY seq"
    return [row["name"] for row in tx.all(sql, (project_id, int(archived)))]


def delete_project(tx: Tx, project_id: str) -> None:
    """The project row and its segments (only its own flags could use them; Unleash's segments go with their
    project too); its access assignments go with it (ON DELETE CASCADE). API tokens scoped to it are kept:
    they serve nothing of it."""
    tx.execute("DELETE FROM segments WHERE project = ?", (project_id,))
    tx.execute("DELETE FROM projects WHERE id = ?", (project_id,))
