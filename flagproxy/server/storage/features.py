"""Feature rows and what hangs off a feature: per-environment state, strategies, tags, dependencies,
lifecycle stages. Callers bump the revision when a change alters what the client API serves."""

from __future__ import annotations

from typing import Any

import orjson

from flagproxy.server.clock import now_iso
from flagproxy.server.storage.database import Row, Tx


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


# --- features ---------------------------------------------------------------------------------------


def feature(tx: Tx, name: str) -> Row | None:
    return tx.one("SELECT * FROM features WHERE name = ?", (name,))


def insert_feature(
    tx: Tx, *, name: str, project: str, type: str, description: str | None, impression_data: bool
) -> Row:
    now = now_iso()
    tx.execute(
        "INSERT INTO features (name, project, type, description, stale, impression_data, archived,"
        " created_at) VALUES (?, ?, ?, ?, 0, ?, 0, ?)",
        (name, project, type, description, int(impression_data), now),
    )
    enter_stage(tx, name, "initial", now)
    row = feature(tx, name)
    assert row is not None
    return row


def update_feature(tx: Tx, name: str, changes: dict[str, Any]) -> None:
    """`changes` maps column names to new values."""
    tx.update("features", ("name", name), changes, {"type", "description", "stale", "impression_data"})


def archive(tx: Tx, name: str) -> None:
    now = now_iso()
    tx.execute("UPDATE features SET archived = 1, archived_at = ? WHERE name = ?", (now, name))
    tx.execute("DELETE FROM feature_lifecycle WHERE feature_name = ? AND stage = 'archived'", (name,))
    enter_stage(tx, name, "archived", now)


def revive(tx: Tx, name: str) -> None:
    tx.execute("UPDATE features SET archived = 0, archived_at = NULL WHERE name = ?", (name,))
    tx.execute("DELETE FROM feature_lifecycle WHERE feature_name = ? AND stage = 'archived'", (name,))


def delete_feature(tx: Tx, name: str) -> None:
    tx.execute("DELETE FROM feature_dependencies WHERE parent = ? OR child = ?", (name, name))
    tx.execute("DELETE FROM features WHERE name = ?", (name,))


# --- per-environment state --------------------------------------------------------------------------


def feature_environment(tx: Tx, name: str, environment: str) -> Row | None:
    return tx.one(
        "SELECT * FROM feature_environments WHERE feature_name = ? AND environment = ?", (name, environment)
    )


def _ensure_feature_environment(tx: Tx, name: str, environment: str) -> None:
    tx.execute(
        "INSERT INTO feature_environments (feature_name, environment, enabled, variants)"
        " VALUES (?, ?, 0, '[]') ON CONFLICT (feature_name, environment) DO NOTHING",
        (name, environment),
    )


def set_enabled(tx: Tx, name: str, environment: str, enabled: bool) -> None:
    _ensure_feature_environment(tx, name, environment)
    tx.execute(
        "UPDATE feature_environments SET enabled = ? WHERE feature_name = ? AND environment = ?",
        (int(enabled), name, environment),
    )


def set_variants(tx: Tx, name: str, environment: str, variants: list[dict[str, Any]]) -> None:
    _ensure_feature_environment(tx, name, environment)
    tx.execute(
        "UPDATE feature_environments SET variants = ? WHERE feature_name = ? AND environment = ?",
        (_json(variants), name, environment),
    )


def mark_seen(tx: Tx, name: str, environment: str, seen_at: str) -> None:
    _ensure_feature_environment(tx, name, environment)
    tx.execute(
        "UPDATE feature_environments SET last_seen_at = ? WHERE feature_name = ? AND environment = ?",
        (seen_at, name, environment),
    )


# --- strategies -------------------------------------------------------------------------------------


def strategy(tx: Tx, strategy_id: str) -> Row | None:
    return tx.one("SELECT * FROM strategies WHERE id = ?", (strategy_id,))


def strategies_of(tx: Tx, name: str, environment: str) -> list[Row]:
    return tx.all(
        "SELECT * FROM strategies WHERE feature_name = ? AND environment = ? ORDER BY sort_order, seq",
        (name, environment),
    )


def save_strategy(tx: Tx, row: dict[str, Any], *, insert: bool) -> None:
    """Insert or replace a strategy; `row` holds decoded values (lists and dicts, bools)."""
    values = (
        row["name"],
        row["title"],
        int(row["disabled"]),
        row["sort_order"],
        _json(row["parameters"]),
        _json(row["constraints"]),
        _json(row["variants"]),
        _json(row["segments"]),
    )
    if insert:
        tx.execute(
            "INSERT INTO strategies (id, feature_name, environment, name, title, disabled, sort_order,"
            " parameters, constraints, variants, segments, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (row["id"], row["feature_name"], row["environment"], *values, now_iso()),
        )
    else:
        tx.execute(
            "UPDATE strategies SET name = ?, title = ?, disabled = ?, sort_order = ?, parameters = ?,"
            " constraints = ?, variants = ?, segments = ? WHERE id = ?",
            (*values, row["id"]),
        )


def set_sort_order(tx: Tx, strategy_id: str, sort_order: int) -> None:
    tx.execute("UPDATE strategies SET sort_order = ? WHERE id = ?", (sort_order, strategy_id))


def delete_strategy(tx: Tx, strategy_id: str) -> None:
    tx.execute("DELETE FROM strategies WHERE id = ?", (strategy_id,))


def next_sort_order(tx: Tx, name: str, environment: str) -> int:
    value = tx.value(
        "SELECT MAX(sort_order) AS top FROM strategies WHERE feature_name = ? AND environment = ?",
        (name, environment),
    )
    return 0 if value is None else int(value) + 1


# --- tags -------------------------------------------------------------------------------------------


def tags_of(tx: Tx, name: str) -> list[Row]:
    return tx.all(
        "SELECT tag_type, tag_value FROM feature_tags WHERE feature_name = ? ORDER BY created_at, tag_type,"
        " tag_value",
        (name,),
    )


def add_tag(tx: Tx, name: str, tag_type: str, value: str) -> None:
    tx.execute(
        "INSERT INTO feature_tags (feature_name, tag_type, tag_value, created_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (feature_name, tag_type, tag_value) DO NOTHING",
        (name, tag_type, value, now_iso()),
    )


def remove_tag(tx: Tx, name: str, tag_type: str, value: str) -> bool:
    return (
        tx.execute(
            "DELETE FROM feature_tags WHERE feature_name = ? AND tag_type = ? AND tag_value = ?",
            (name, tag_type, value),
        )
        > 0
    )


# --- dependencies -----------------------------------------------------------------------------------


def parents_of(tx: Tx, child: str) -> list[Row]:
    return tx.all("SELECT * FROM feature_dependencies WHERE child = ? ORDER BY parent", (child,))


def children_of(tx: Tx, parent: str) -> list[Row]:
    return tx.all("SELECT * FROM feature_dependencies WHERE parent = ? ORDER BY child", (parent,))


def set_dependency(tx: Tx, child: str, parent: str, enabled: bool, variants: list[str]) -> None:
    tx.execute(
        "INSERT INTO feature_dependencies (child, parent, enabled, variants) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (child, parent) DO UPDATE SET enabled = excluded.enabled, variants = excluded.variants",
        (child, parent, int(enabled), _json(variants)),
    )


def remove_dependencies(tx: Tx, child: str, parent: str | None = None) -> int:
    if parent is None:
        return tx.execute("DELETE FROM feature_dependencies WHERE child = ?", (child,))
    return tx.execute("DELETE FROM feature_dependencies WHERE child = ? AND parent = ?", (child, parent))


# --- lifecycle --------------------------------------------------------------------------------------


def enter_stage(tx: Tx, name: str, stage: str, at: str | None = None) -> None:
    """Record the first time a feature reached a stage (later visits keep the first time)."""
    tx.execute(
        "INSERT INTO feature_lifecycle (feature_name, stage, entered_at) VALUES (?, ?, ?)"
        " ON CONFLICT (feature_name, stage) DO NOTHING",
        (name, stage, at or now_iso()),
    )
