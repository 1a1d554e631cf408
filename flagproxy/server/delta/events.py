"""Delta events as one client token reads them, and the documents that carry them.

The wire format is Unleash's (`clientFeaturesDeltaSchema`): `{"events": [...]}`, each event with a numeric
`eventId` and a `type`: `hydration` (`features`, `segments`), `feature-updated` (`feature`),
`feature-removed` (`featureName`, `project`), `segment-updated` (`segment`), `segment-removed`
(`segmentId`). Features are scoped as the client features document is (the token's projects and
environment, `project`, `namePrefix` and `tag` filters); segments are not, as in Unleash's hydration, so
a feature never names a segment its reader lacks.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import orjson

from flagproxy.server.client_features import ClientQuery, feature_wire, in_scope, segment_wire, selected
from flagproxy.server.storage.catalog import Catalog
from flagproxy.server.storage.database import Row


def _tags(text: str | None) -> frozenset[tuple[str, str]]:
    return frozenset((pair[0], pair[1]) for pair in orjson.loads(text)) if text else frozenset()


@dataclass(frozen=True, slots=True)
class DeltaEvent:
    """One row of the log, with its wire bytes ready: `updated` for a reader that has the feature in scope
    now, `removed` for one that had it and no longer has."""

    event_id: int
    environment: str | None  # None: a segment event, for every environment
    name: str | None
    project: str | None  # where the feature is now (None: it is gone)
    tags: frozenset[tuple[str, str]]
    old_project: str | None  # where it was before (None: it was not served before)
    old_tags: frozenset[tuple[str, str]]
    updated: bytes | None
    removed: bytes | None
    retagged: bool  # only the tags changed: news only to readers it brings into or out of a tag filter

    @classmethod
    def from_row(cls, row: Row) -> DeltaEvent:
        event_id = int(row["event_id"])
        kind = row["type"]
        head = b'{"eventId":%d,"type":"%s",' % (event_id, kind.encode())
        updated = removed = None
        if kind in ("feature-updated", "feature-retagged"):
            feature = b'{"eventId":%d,"type":"feature-updated","feature":' % event_id
            updated = feature + row["body"].encode() + b"}"
        if kind.startswith("feature") and row["old_project"] is not None:
            removed = (
                b'{"eventId":%d,"type":"feature-removed",' % event_id
                + orjson.dumps({"featureName": row["name"], "project": row["old_project"]})[1:]
            )
        if kind == "segment-updated":
            updated = head + b'"segment":' + row["body"].encode() + b"}"
        if kind == "segment-removed":
            updated = head + b'"segmentId":%d}' % int(row["segment_id"])
        return cls(
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

    def wire_for(self, query: ClientQuery) -> bytes | None:
        """This event as `query`'s reader sees it, or None when it does not concern that reader."""
        if self.environment is not None and self.environment != query.environment:
            return None
        if self.name is None:  # a segment
            return self.updated
        name = self.name
        now = self.updated is not None and in_scope(query, self.project or "", name, self.tags)
        before = self.removed is not None and in_scope(query, self.old_project or "", name, self.old_tags)
        if self.retagged and now == before:
            return None
        if now:
            return self.updated
        return self.removed if before else None


def parse(rows: Iterable[Row]) -> list[DeltaEvent]:
    return [DeltaEvent.from_row(row) for row in rows]


def scoped(events: Sequence[DeltaEvent], query: ClientQuery, after: int) -> tuple[list[bytes], int]:
    """The wire events newer than `after` that concern `query`'s reader, in order, and the last one's id
    (`after` when there are none)."""
    chosen = []
    last = after
    for event in events:
        if event.event_id > after:
            wire = event.wire_for(query)
            if wire is not None:
                chosen.append(wire)
                last = event.event_id
    return chosen, last


def document(wire_events: Sequence[bytes]) -> bytes:
    return b'{"events":[' + b",".join(wire_events) + b"]}"


def hydration(catalog: Catalog, query: ClientQuery, event_id: int) -> bytes:
    """One `hydration` event: the features in the reader's scope, as the client API serves them with
    segments by reference, and every segment."""
    features = [feature_wire(catalog, f, query.environment, inline=False) for f in selected(catalog, query)]
    event = {
        "eventId": event_id,
        "type": "hydration",
        "features": features,
        "segments": [segment_wire(catalog.segments[segment_id]) for segment_id in sorted(catalog.segments)],
    }
    return orjson.dumps(event)
