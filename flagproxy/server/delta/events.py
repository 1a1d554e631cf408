"""The server's delta events: the log's rows as events, and the hydration of one client token.

The wire format, the events' scoping and their documents are every product's (flagproxy/http/delta.py,
Unleash's `clientFeaturesDeltaSchema`). Features are scoped as the client features document is (the
token's projects and environment, `project`, `namePrefix` and `tag` filters); segments are not, as in
Unleash's hydration, so a feature never names a segment its reader lacks.
"""

from __future__ import annotations

from collections.abc import Iterable

import orjson

from flagproxy.http import delta as wire
from flagproxy.http.delta import DeltaEvent, document, scoped
from flagproxy.server.client_features import ClientQuery, feature_wire, segment_wire, selected
from flagproxy.server.storage.catalog import Catalog
from flagproxy.server.storage.database import Row

__all__ = ["DeltaEvent", "document", "hydration", "parse", "scoped"]


def _tags(text: str | None) -> frozenset[tuple[str, str]]:
    return frozenset((pair[0], pair[1]) for pair in orjson.loads(text)) if text else frozenset()


def from_row(row: Row) -> DeltaEvent:
    """One row of the log as its event, wire bytes made once for every reader."""
    event_id = int(row["event_id"])
    kind = row["type"]
    updated = removed = None
    if kind in ("feature-updated", "feature-retagged"):
        updated = wire.feature_updated(event_id, row["body"].encode())
    if kind.startswith("feature") and row["old_project"] is not None:
        removed = wire.feature_removed(event_id, row["name"], row["old_project"])
    if kind == "segment-updated":
        updated = wire.segment_updated(event_id, row["body"].encode())
    if kind == "segment-removed":
        updated = wire.segment_removed(event_id, int(row["segment_id"]))
    return DeltaEvent(
        event_id=event_id,
        environment=row["environment"],
        name=row["name"],
        project=row["project"],
        tags=_tags(row["tags"]),
        old_project=row["old_project"],
        old_tags=_tags(row["old_tags"]),
        updated=updated,
        removed=removed,
        retagged=kind == "feature-retagged",
    )


def parse(rows: Iterable[Row]) -> list[DeltaEvent]:
    return [from_row(row) for row in rows]


def hydration(catalog: Catalog, query: ClientQuery, event_id: int) -> bytes:
    """One `hydration` event: the features in the reader's scope, as the client API serves them with
    segments by reference, and every segment."""
    features = [feature_wire(catalog, f, query.environment, inline=False) for f in selected(catalog, query)]
    segments = [segment_wire(catalog.segments[segment_id]) for segment_id in sorted(catalog.segments)]
    return wire.hydration(event_id, features, segments)
