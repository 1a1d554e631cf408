"""Recording what a change did to the client API, in the transaction that makes it.

Every unit of work that may alter served data (`routes.common.changing`) calls `record` at its end. It
renders the features the unit wrote (database triggers list them in `delta_dirty`: any write to a table
the client API serves from, whichever code made it) in every environment, and every served segment, as the
client API serves them, and compares each with the digest the log last kept: whatever differs is an event,
numbered with the next revision, and only then is the data revision bumped to it. This is the one place
that decides whether what is served changed: comparing what is served, not which route ran, means every
kind of change (admin API, the console through it, project and segment edits) appears once, and a write
that changes nothing served appears not at all and leaves the revision (and the client API's ETag) as it
was. The unit takes the revision row's lock first, so events are numbered and committed in one order on
both backends: a reader that sees revision N sees every event up to N.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

import orjson

from flagproxy.server.client_features import feature_wire, segment_wire, tag_pairs
from flagproxy.server.storage import catalog as catalog_rows
from flagproxy.server.storage import delta as delta_rows
from flagproxy.server.storage import revision
from flagproxy.server.storage.database import Tx

log = logging.getLogger("flagproxy.server")


# More features written at once than this: reading them all is as cheap as naming them.
WHOLE_CATALOG_BEYOND = 500


def _digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def _tags_json(tags: frozenset[tuple[str, str]]) -> str:
    return orjson.dumps(sorted(tags)).decode()


def record(tx: Tx, kept: int, event_id: int) -> bool:
    """Append the events of the change in `tx`, numbered `event_id` (the revision it will bump to), and keep
    the newest `kept` events (rows: a feature in one environment, or a segment; older revisions hydrate).
    Whether what is served changed: there were events, or the log had nothing to compare with."""
    first = delta_rows.floor(tx) is None
    # The database's triggers name the features written since the last look; only those can differ.
    dirty = delta_rows.take_dirty(tx)
    only = () if first or "*" in dirty or len(dirty) > WHOLE_CATALOG_BEYOND else dirty
    catalog = catalog_rows.load(tx, only=only)
    known_features = delta_rows.recorded_features(tx, only)
    known_segments = delta_rows.recorded_segments(tx)
    served_segments = delta_rows.served_segment_ids(tx)

    segment_updates: list[tuple[object, ...]] = []
    for segment_id, segment in catalog.segments.items():
        if segment_id not in served_segments:
            continue
        body = orjson.dumps(segment_wire(segment))
        digest = _digest(body)
        if known_segments.pop(segment_id, None) != digest:
            delta_rows.remember_segment(tx, segment_id, digest)
            segment_updates.append(_row(event_id, None, "segment-updated", segment_id=segment_id, body=body))
    segment_removals = []
    for segment_id in sorted(known_segments):
        delta_rows.forget_segment(tx, segment_id)
        segment_removals.append(_row(event_id, None, "segment-removed", segment_id=segment_id))

    feature_events: list[tuple[object, ...]] = []
    for environment in catalog.environments:
        env = environment["name"]
        for feature in catalog.features:
            name = feature["name"]
            body = orjson.dumps(feature_wire(catalog, feature, env, inline=False))
            now = delta_rows.Recorded(feature["project"], _tags_json(tag_pairs(catalog, name)), _digest(body))
            before = known_features.pop((env, name), None)
            if before == now:
                continue
            delta_rows.remember_feature(tx, env, name, now)
            # Only its tags changed: it matters to readers filtering by tag, whom it may bring in or out.
            retagged = before is not None and before.digest == now.digest
            kind = "feature-retagged" if retagged else "feature-updated"
            feature_events.append(
                _row(
                    event_id, env, kind, name=name, project=now.project, tags=now.tags,
                    old_project=before.project if before else None, old_tags=before.tags if before else None,
                    body=body,
                )
            )  # fmt: skip
    for (env, name), before in sorted(known_features.items()):
        delta_rows.forget_feature(tx, env, name)
        gone = {"name": name, "old_project": before.project, "old_tags": before.tags}
        feature_events.append(_row(event_id, env, "feature-removed", **gone))

    if first:
        # The log starts here: what is served now is its base, readers of older revisions hydrate.
        delta_rows.set_floor(tx, event_id)
        return True
    # Segments first (a feature may use a new one), removed segments last (nothing uses them any more).
    events = [*segment_updates, *feature_events, *segment_removals]
    if not events:
        return False
    delta_rows.append(tx, events)
    dropped = delta_rows.keep_latest(tx, kept)
    if dropped is not None:
        delta_rows.set_floor(tx, dropped)
    delta_rows.notify(tx, event_id)
    log.debug("delta log: revision %d, %d events", event_id, len(events))
    return True


def initialize(tx: Tx) -> bool:
    """Start the log at the current revision if it has not started (a new or upgraded database), so that
    the first change is already an event; True when it started now."""
    if delta_rows.floor(tx) is not None:
        return False
    if tx.dialect == "postgres":  # the revision row's lock orders this with any change being committed
        tx.execute("SELECT value FROM revision WHERE id = 1 FOR UPDATE")
    record(tx, kept=0, event_id=revision.current(tx))  # starting the log writes no events
    return True


def _row(event_id: int, environment: str | None, kind: str, **values: Any) -> tuple[object, ...]:
    columns = {"event_id": event_id, "environment": environment, "type": kind, **values}
    if isinstance(columns.get("body"), bytes):
        columns["body"] = columns["body"].decode()
    return tuple(columns.get(column) for column in delta_rows.EVENT_COLUMNS)
