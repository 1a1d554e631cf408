"""Roles and their permissions, groups and their members, and who holds which role in which project."""

from __future__ import annotations

from typing import Any

from flagproxy.server.clock import now_iso
from flagproxy.server.identity.permissions import BUILT_IN
from flagproxy.server.storage.database import Row, Tx

# ---- roles --------------------------------------------------------------------------------------------


def role(tx: Tx, role_id: int) -> Row | None:
    return tx.one("SELECT * FROM roles WHERE id = ?", (role_id,))


def role_by_name(tx: Tx, name: str) -> Row | None:
    return tx.one("SELECT * FROM roles WHERE name = ?", (name,))


def all_roles(tx: Tx) -> list[Row]:
    return tx.all("SELECT * FROM roles ORDER BY id")


def insert_role(tx: Tx, name: str, role_type: str, description: str) -> int:
    tx.execute(
        "INSERT INTO roles (name, type, description, built_in, created_at) VALUES (?, ?, ?, 0, ?)",
        (name, role_type, description, now_iso()),
    )
    return int(tx.value("SELECT id FROM roles WHERE name = ?", (name,)))


def update_role(tx: Tx, role_id: int, name: str, role_type: str, description: str) -> None:
    tx.execute(
        "UPDATE roles SET name = ?, type = ?, description = ? WHERE id = ?",
        (name, role_type, description, role_id),
    )


def delete_role(tx: Tx, role_id: int) -> None:
    tx.execute("DELETE FROM roles WHERE id = ?", (role_id,))


def role_in_use(tx: Tx, role_id: int) -> bool:
    return bool(
        tx.value("SELECT COUNT(*) FROM users WHERE root_role = ?", (role_id,))
        or tx.value("SELECT COUNT(*) FROM project_roles WHERE role_id = ?", (role_id,))
    )


def set_permissions(tx: Tx, role_id: int, permissions: list[tuple[str, str | None]]) -> None:
    tx.execute("DELETE FROM role_permissions WHERE role_id = ?", (role_id,))
    for name, environment in sorted(set(permissions), key=lambda p: (p[0], p[1] or "")):
        tx.execute(
            "INSERT INTO role_permissions (role_id, permission, environment) VALUES (?, ?, ?)",
            (role_id, name, environment or ""),
        )


def permissions_of(tx: Tx, role_id: int) -> list[tuple[str, str | None]]:
    """(permission, environment or None) of a role; a built-in role's come from the code, not the table."""
    built_in = BUILT_IN.get(role_id)
    if built_in is not None:
        return [(name, None) for name in sorted(built_in.permissions)]
    rows = tx.all(
        "SELECT permission, environment FROM role_permissions WHERE role_id = ?"
        " ORDER BY permission, environment",
        (role_id,),
    )
    return [(row["permission"], row["environment"] or None) for row in rows]


def role_json(row: Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "type": row["type"],
        "name": row["name"],
        "description": row["description"],
        "project": None,
    }


# ---- groups -------------------------------------------------------------------------------------------


def group(tx: Tx, group_id: int) -> Row | None:
    return tx.one("SELECT * FROM user_groups WHERE id = ?", (group_id,))


def group_by_name(tx: Tx, name: str) -> Row | None:
    return tx.one("SELECT * FROM user_groups WHERE name = ?", (name,))


def all_groups(tx: Tx) -> list[Row]:
    return tx.all("SELECT * FROM user_groups ORDER BY id")


def insert_group(tx: Tx, name: str, description: str | None) -> int:
    tx.execute(
        "INSERT INTO user_groups (name, description, created_at) VALUES (?, ?, ?)",
        (name, description, now_iso()),
    )
    return int(tx.value("SELECT id FROM user_groups WHERE name = ?", (name,)))


def update_group(tx: Tx, group_id: int, name: str, description: str | None) -> None:
    tx.execute("UPDATE user_groups SET name = ?, description = ? WHERE id = ?", (name, description, group_id))


def delete_group(tx: Tx, group_id: int) -> bool:
    return tx.execute("DELETE FROM user_groups WHERE id = ?", (group_id,)) > 0


def set_members(tx: Tx, group_id: int, user_ids: list[int]) -> None:
    tx.execute("DELETE FROM group_members WHERE group_id = ?", (group_id,))
    for user_id in sorted(set(user_ids)):
        tx.execute("INSERT INTO group_members (group_id, user_id) VALUES (?, ?)", (group_id, user_id))


def members(tx: Tx, group_id: int) -> list[Row]:
    return tx.all(
        "SELECT u.id, u.name, u.email, u.username FROM group_members m JOIN users u ON u.id = m.user_id"
        " WHERE m.group_id = ? ORDER BY u.id",
        (group_id,),
    )


def group_json(tx: Tx, row: Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "name": row["name"],
        "description": row["description"],
        "createdAt": row["created_at"],
        "users": [{"user": dict(member)} for member in members(tx, row["id"])],
    }


# ---- project access -----------------------------------------------------------------------------------


def project_assignments(tx: Tx, project: str) -> list[Row]:
    return tx.all(
        "SELECT role_id, user_id, group_id FROM project_roles WHERE project = ?"
        " ORDER BY role_id, user_id, group_id",
        (project,),
    )


def replace_project_access(
    tx: Tx, project: str, assignments: list[tuple[int, int | None, int | None]]
) -> None:
    """Every (role, user, group) assignment of `project`, replacing what was there (one transaction)."""
    tx.execute("DELETE FROM project_roles WHERE project = ?", (project,))
    add_project_access(tx, project, assignments)


def add_project_access(tx: Tx, project: str, assignments: list[tuple[int, int | None, int | None]]) -> None:
    existing = {(r["role_id"], r["user_id"], r["group_id"]) for r in project_assignments(tx, project)}
    for role_id, user_id, group_id in sorted(set(assignments), key=str):
        if (role_id, user_id, group_id) not in existing:
            tx.execute(
                "INSERT INTO project_roles (project, role_id, user_id, group_id) VALUES (?, ?, ?, ?)",
                (project, role_id, user_id, group_id),
            )


def project_roles_of_user(tx: Tx, user_id: int) -> list[Row]:
    """(project, role_id) the user holds, directly or through a group."""
    return tx.all(
        "SELECT project, role_id FROM project_roles WHERE user_id = ?"
        " UNION SELECT r.project, r.role_id FROM project_roles r"
        " JOIN group_members m ON m.group_id = r.group_id"
        " WHERE m.user_id = ?",
        (user_id, user_id),
    )
