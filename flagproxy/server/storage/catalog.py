"""All flag data in a few queries, decoded: what the feature listings and the client API are built from.

Flag servers hold hundreds to a few thousand flags; reading them whole and assembling in Python keeps
every view (admin listing, client payload) on one code path for both backends.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import orjson

from flagproxy.server.storage.database import Row, Tx

LIFECYCLE_ORDER = ("initial", "pre-live", "live", "completed", "archived")


@dataclass
class Catalog:
    environments: list[Row]
    features: list[Row]
    feature_environments: dict[tuple[str, str], Row] = field(default_factory=dict)
    strategies: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    tags: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    parents: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    children: dict[str, list[str]] = field(default_factory=dict)
    lifecycle: dict[str, dict[str, str]] = field(default_factory=dict)
    segments: dict[int, dict[str, Any]] = field(default_factory=dict)


def decode_strategy(row: Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "feature_name": row["feature_name"],
        "environment": row["environment"],
        "name": row["name"],
        "title": row["title"],
        "disabled": bool(row["disabled"]),
        "sort_order": row["sort_order"],
        "parameters": orjson.loads(row["parameters"]),
        "constraints": orjson.loads(row["constraints"]),
        "variants": orjson.loads(row["variants"]),
        "segments": orjson.loads(row["segments"]),
    }


def decode_segment(row: Row) -> dict[str, Any]:
    return {**row, "constraints": orjson.loads(row["constraints"])}


def load(
    tx: Tx, *, include_archived: bool = False, feature_name: str | None = None, only: Collection[str] = ()
) -> Catalog:
    """Every feature (not archived unless asked), or `feature_name`, or those named in `only` (their rows
    alone read from the database); environments and segments always whole."""
    where = [] if include_archived else ["archived = 0"]
    params: list[Any] = []
    if feature_name is not None:
        where.append("name = ?")
        params.append(feature_name)
    named = ""  # a feature-name filter for the per-feature tables
    if only:
        named = f" WHERE {{column}} IN ({', '.join('?' for _ in only)})"
        where.append(named.removeprefix(" WHERE ").format(column="name"))
        params.extend(only)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    features = tx.all(f"SELECT * FROM features{clause} ORDER BY seq", params)
    catalog = Catalog(
        environments=tx.all("SELECT * FROM environments ORDER BY sort_order, name"), features=features
    )
    for row in tx.all("SELECT * FROM segments ORDER BY id"):
        catalog.segments[int(row["id"])] = decode_segment(row)
    names = {row["name"] for row in features}
    if not names:
        return catalog

    def rows(table: str, column: str, order: str = "") -> list[Row]:
        if not only:
            return tx.all(f"SELECT * FROM {table}{order}")
        return tx.all(f"SELECT * FROM {table}{named.format(column=column)}{order}", list(only))

    for row in rows("feature_environments", "feature_name"):
        if row["feature_name"] in names:
            catalog.feature_environments[(row["feature_name"], row["environment"])] = {
                **row,
                "variants": orjson.loads(row["variants"]),
            }
    for row in rows("strategies", "feature_name", " ORDER BY sort_order, seq"):
        if row["feature_name"] in names:
            key = (row["feature_name"], row["environment"])
            catalog.strategies.setdefault(key, []).append(decode_strategy(row))
    for row in rows("feature_tags", "feature_name", " ORDER BY created_at, tag_type, tag_value"):
        if row["feature_name"] in names:
            catalog.tags.setdefault(row["feature_name"], []).append(
                {"value": row["tag_value"], "type": row["tag_type"]}
            )
    for row in rows("feature_dependencies", "child", " ORDER BY child, parent"):
        dependency: dict[str, Any] = {"feature": row["parent"], "enabled": bool(row["enabled"])}
        variants = orjson.loads(row["variants"])
        if dependency["enabled"] and variants:
            dependency["variants"] = variants
        catalog.parents.setdefault(row["child"], []).append(dependency)
        catalog.children.setdefault(row["parent"], []).append(row["child"])
    for row in rows("feature_lifecycle", "feature_name"):
        if row["feature_name"] in names:
            catalog.lifecycle.setdefault(row["feature_name"], {})[row["stage"]] = row["entered_at"]
    return catalog
