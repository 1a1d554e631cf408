"""The delta log's rows: the events each change produced, what was last recorded of every feature and
segment, and the window of revisions the log can replay (flagproxy/server/delta/ decides what goes in)."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

import orjson

from flagproxy.server.storage.database import Row, Tx

NOTIFY_CHANNEL = "flagproxy_delta"


@dataclass(frozen=True)
class Recorded:
    """What the log holds of one feature in one environment."""

    project: str
    tags: str  # JSON, sorted [type, value] pairs
    digest: str


def floor(tx: Tx) -> int | None:
    """The oldest revision a reader can be brought forward from; None before the first change."""
    value = tx.value("SELECT floor FROM delta_window WHERE id = 1")
    return None if value is None else int(value)


def set_floor(tx: Tx, revision: int) -> None:
    tx.execute("UPDATE delta_window SET floor = ? WHERE id = 1", (revision,))


def recorded_features(tx: Tx, only: Collection[str] = ()) -> dict[tuple[str, str], Recorded]:
    """What the log holds of every feature, or of those named in `only`."""
    if only:
        listed = ", ".join("?" for _ in only)
        rows = tx.all(f"SELECT * FROM delta_features WHERE name IN ({listed})", list(only))
    else:
        rows = tx.all("SELECT * FROM delta_features")
    return {(r["environment"], r["name"]): Recorded(r["project"], r["tags"], r["digest"]) for r in rows}


def take_dirty(tx: Tx) -> set[str]:
    """The features written since the last look (marked by the database's triggers; '*': all of them)."""
    names = {row["name"] for row in tx.all("SELECT DISTINCT name FROM delta_dirty")}
    if names:
        tx.execute("DELETE FROM delta_dirty")
    return names


def served_segment_ids(tx: Tx) -> set[int]:
    """The segments a strategy the client API serves uses (enabled, of a feature not archived)."""
    used: set[int] = set()
    for row in tx.all(
        "SELECT s.segments FROM strategies s JOIN features f ON f.name = s.feature_name"
        " WHERE f.archived = 0 AND s.disabled = 0 AND s.segments <> '[]'"
    ):
        used.update(int(segment_id) for segment_id in orjson.loads(row["segments"]))
    return used


def recorded_segments(tx: Tx) -> dict[int, str]:
    return {int(row["id"]): row["digest"] for row in tx.all("SELECT id, digest FROM delta_segments")}


def forget_feature(tx: Tx, environment: str, name: str) -> None:
    tx.execute("DELETE FROM delta_features WHERE environment = ? AND name = ?", (environment, name))


def remember_feature(tx: Tx, environment: str, name: str, recorded: Recorded) -> None:
    forget_feature(tx, environment, name)
    tx.execute(
        "INSERT INTO delta_features (environment, name, project, tags, digest) VALUES (?, ?, ?, ?, ?)",
        (environment, name, recorded.project, recorded.tags, recorded.digest),
    )


def forget_segment(tx: Tx, segment_id: int) -> None:
    tx.execute("DELETE FROM delta_segments WHERE id = ?", (segment_id,))


def remember_segment(tx: Tx, segment_id: int, digest: str) -> None:
    forget_segment(tx, segment_id)
    tx.execute("INSERT INTO delta_segments (id, digest) VALUES (?, ?)", (segment_id, digest))


EVENT_COLUMNS = (
    "event_id", "environment", "type", "name", "project", "tags", "old_project", "old_tags", "segment_id",
    "body",
)  # fmt: skip


def append(tx: Tx, rows: Iterable[tuple[object, ...]]) -> None:
    """Events in EVENT_COLUMNS order; `seq` keeps the order they are given in."""
    placeholders = ", ".join("?" for _ in EVENT_COLUMNS)
    statement = f"INSERT INTO delta_events ({', '.join(EVENT_COLUMNS)}) VALUES ({placeholders})"
    for row in rows:
        tx.execute(statement, row)


def events_after(tx: Tx, revision: int, environment: str | None = None) -> list[Row]:
    """Events newer than `revision`, oldest first: of `environment` and the segments, or of every
    environment when it is None."""
    if environment is None:
        return tx.all("SELECT * FROM delta_events WHERE event_id > ? ORDER BY event_id, seq", (revision,))
    return tx.all(
        "SELECT * FROM delta_events WHERE event_id > ? AND (environment = ? OR environment IS NULL)"
        " ORDER BY event_id, seq",
        (revision, environment),
    )


def latest_event(tx: Tx) -> int | None:
    value = tx.value("SELECT MAX(event_id) FROM delta_events")
    return None if value is None else int(value)


def keep_latest(tx: Tx, rows: int) -> int | None:
    """Drop whole revisions, oldest first, until at most `rows` events are left; the newest revision dropped
    (the log's new floor), or None when nothing had to go."""
    cut = tx.value("SELECT event_id FROM delta_events ORDER BY event_id DESC LIMIT 1 OFFSET ?", (rows,))
    if cut is None:
        return None
    tx.execute("DELETE FROM delta_events WHERE event_id <= ?", (cut,))
    return int(cut)


def notify(tx: Tx, revision: int) -> None:
    """Tell every server process listening on the database that events up to `revision` are there (sent by
    PostgreSQL when the transaction commits; SQLite readers poll instead)."""
    if tx.dialect == "postgres":
        tx.execute("SELECT pg_notify(?, ?)", (NOTIFY_CHANNEL, str(revision)))
