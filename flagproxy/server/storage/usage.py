"""What SDKs and proxies report: registered applications and per-hour feature usage counts."""

from __future__ import annotations

from typing import Any

import orjson

from flagproxy.server.storage.database import Row, Tx

# Counts stop growing at the largest BIGINT instead of failing the report that would overflow it.
MAX_COUNT = 2**63 - 1


def register_application(tx: Tx, application: dict[str, Any], seen_at: str) -> None:
    tx.execute(
        "INSERT INTO client_applications (app_name, instance_id, sdk_version, environment, strategies,"
        " interval_ms, started, last_seen) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (app_name, instance_id) DO UPDATE SET sdk_version = excluded.sdk_version,"
        " environment = excluded.environment, strategies = excluded.strategies,"
        " interval_ms = excluded.interval_ms, started = excluded.started, last_seen = excluded.last_seen",
        (
            application["app_name"],
            application["instance_id"],
            application.get("sdk_version"),
            application.get("environment"),
            orjson.dumps(application.get("strategies", [])).decode(),
            application.get("interval_ms"),
            application.get("started"),
            seen_at,
        ),
    )


def touch_application(tx: Tx, app_name: str, instance_id: str, environment: str, seen_at: str) -> None:
    """Metrics from an application that never registered still make it known."""
    tx.execute(
        "INSERT INTO client_applications (app_name, instance_id, environment, strategies, last_seen)"
        " VALUES (?, ?, ?, '[]', ?) ON CONFLICT (app_name, instance_id) DO UPDATE SET"
        " last_seen = excluded.last_seen",
        (app_name, instance_id, environment, seen_at),
    )


def applications(tx: Tx) -> list[Row]:
    return tx.all("SELECT * FROM client_applications ORDER BY app_name, instance_id")


def add_usage(
    tx: Tx,
    *,
    feature: str,
    environment: str,
    app_name: str,
    hour: str,
    yes: int,
    no: int,
    variants: dict[str, int],
) -> None:
    key = (feature, environment, app_name, hour)
    tx.execute(
        "INSERT INTO feature_usage (feature_name, environment, app_name, hour, yes, no, variants)"
        " VALUES (?, ?, ?, ?, 0, 0, '{}') ON CONFLICT (feature_name, environment, app_name, hour) DO NOTHING",
        key,
    )
    # SQLite's BEGIN IMMEDIATE already serialises writers; PostgreSQL needs the row lock for the merge.
    lock = " FOR UPDATE" if tx.dialect == "postgres" else ""
    row = tx.one(
        "SELECT yes, no, variants FROM feature_usage WHERE feature_name = ? AND environment = ?"
        " AND app_name = ? AND hour = ?" + lock,
        key,
    )
    assert row is not None
    merged: dict[str, int] = orjson.loads(row["variants"])
    for name, count in variants.items():
        merged[name] = min(MAX_COUNT, merged.get(name, 0) + count)
    tx.execute(
        "UPDATE feature_usage SET yes = ?, no = ?, variants = ? WHERE feature_name = ? AND environment = ?"
        " AND app_name = ? AND hour = ?",
        (
            min(MAX_COUNT, int(row["yes"]) + yes),
            min(MAX_COUNT, int(row["no"]) + no),
            orjson.dumps(merged).decode(),
            *key,
        ),
    )


def usage_of(tx: Tx, feature: str, since_hour: str) -> list[Row]:
    return tx.all(
        "SELECT * FROM feature_usage WHERE feature_name = ? AND hour >= ? ORDER BY hour, environment,"
        " app_name",
        (feature, since_hour),
    )
