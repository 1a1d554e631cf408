"""Edge's delta log: each feed's changes, derived from the successive features documents it publishes.

The upstream is polled for whole documents (flagproxy/edge/sync.py); what changed between two of them is
what the delta API and the stream re-serve (flagproxy/edge/delta_api.py). The leader compares each new
document of a feed with the last (`ChangeLog.record`): a flag new or different is `feature-updated`, one
gone is `feature-removed`, segments likewise, segments updated first and removed last, as the server
orders them (a flag may use a new segment; nothing uses a removed one). Every event of one document
carries the same `eventId`, and the log is published in the feed's file with the document
(flagproxy/sync/publication.py), so every worker serves the same events with the same ids.

Event ids are the leader's clock in seconds at the change, or one more than the last when changes come
faster, and a feed's backup keeps its last id: they keep increasing across restarts of the edge, so an
SDK that comes back with an id of an earlier run hydrates rather than being told nothing changed. Without
a backup a run knows nothing of the last one's ids, so two rules keep them apart: a run's first id is after
the second the process started in (the last run recorded its last change at the latest in that second),
and a reader resumes from, or is told nothing changed since, only an id this run gave out (`FeedLog.issued`):
the last run's ids may have got ahead of the clock (changes faster than one a second), and one of them that
this run's range covers but never gave out gets a hydration. A stopping edge waits (a few seconds at most)
until the clock reaches the last id it gave out (flagproxy/edge/feeds.py `Feeds.ahead_of_clock`): a change
streamed within the second of the hydration takes an id a second ahead of the clock, which the next run's
first id would otherwise meet. Ids stay seconds, not milliseconds: the SDKs and Unleash Edge read them as
32-bit integers (`event_id: u32` in unleash-types), and millisecond ids broke the Python SDK.
Only the newest `kept` events are kept; a reader further behind hydrates.

A feed the edge streams (`--streaming`) takes its events from the upstream's instead (`ChangeLog.streamed`,
called by flagproxy/edge/relayed.py for each change the stream brings): they are scoped to the feed's token
already, and appended as they are, with this log's own id, each flag's `oldProject` the project the log
held it in; an event that leaves what the log holds as it was is left out, as `record` leaves out what did
not change. A hydration (and any change the stream's patching does not take) still goes through `record`,
which compares with the log's flags and segments as the streamed events left them.

`FeedLog` is a worker's view of one published log: the events as flagproxy/http/delta.py's `DeltaEvent`,
their wire bytes made once for every reader.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from flagproxy.http import delta as wire
from flagproxy.http.delta import NO_TAGS, DeltaEvent

DEFAULT_PROJECT = "default"
STARTED = int(time.time())  # the second this process started in: a run before it recorded nothing later


def _project(feature: Mapping[str, Any]) -> str:
    return str(feature.get("project") or DEFAULT_PROJECT)


def _features(payload: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    listed = payload.get("features")
    return {f["name"]: f for f in listed or () if isinstance(f, Mapping) and isinstance(f.get("name"), str)}


def _segments(payload: Mapping[str, Any]) -> dict[int, Mapping[str, Any]]:
    listed = payload.get("segments")
    return {s["id"]: s for s in listed or () if isinstance(s, Mapping) and isinstance(s.get("id"), int)}


class ChangeLog:
    """One feed's log on the leader: the last document's flags and segments, and the newest events."""

    def __init__(self, kept: int, started: int = STARTED) -> None:
        self.kept = kept
        self.started = started
        self.features: dict[str, Mapping[str, Any]] = {}
        self.segments: dict[int, Mapping[str, Any]] = {}
        self.events: deque[dict[str, Any]] = deque()
        self.last = 0  # the id of the last change (the revision a reader of the last document is at)
        self.floor: int | None = None  # the oldest revision a reader can resume from; None: no document yet

    def continue_after(self, event_id: int) -> None:
        """A backup's last id: this run's ids come after it."""
        self.last = max(self.last, event_id)

    def record(self, payload: Mapping[str, Any], now: int | None = None) -> dict[str, Any]:
        """The feed's new document: its events appended (none when no flag or segment changed: the revision
        stays) and the log as published with it."""
        features, segments = _features(payload), _segments(payload)
        clock = int(time.time()) if now is None else now
        if self.floor is None:  # the first document: the log starts here, older readers hydrate
            self.floor = self.last = max(self.last + 1, clock, self.started + 1)
        else:
            event_id = max(self.last + 1, clock)
            self._append(event_id, self._compare(event_id, features, segments))
        self.features, self.segments = features, segments
        return self._log()

    def streamed(self, events: list[Any], now: int | None = None) -> dict[str, Any]:
        """A change the upstream streamed (its events, no hydration among them), appended with one new id
        if any of them changes what the log holds; the log as published with it (as `record`)."""
        event_id = max(self.last + 1, int(time.time()) if now is None else now)
        head = {"eventId": event_id}
        appended = []
        for event in events:
            kind = event.get("type") if isinstance(event, Mapping) else None
            if kind == "feature-updated" and isinstance(event.get("feature"), Mapping):
                feature = event["feature"]
                before = self.features.get(feature["name"])
                if before is not None and before == feature:
                    continue
                old = None if before is None else _project(before)
                self.features[feature["name"]] = feature
                appended.append({**head, "type": kind, "feature": feature, "oldProject": old})
            elif kind == "feature-removed" and isinstance(event.get("featureName"), str):
                name = event["featureName"]
                held = self.features.pop(name, None)
                if held is not None:
                    appended.append({**head, "type": kind, "featureName": name, "project": _project(held)})
            elif kind == "segment-updated" and isinstance(event.get("segment"), Mapping):
                segment = event["segment"]
                if self.segments.get(segment.get("id")) != segment:
                    self.segments[segment["id"]] = segment
                    appended.append({**head, "type": kind, "segment": segment})
            elif kind == "segment-removed" and self.segments.pop(event.get("segmentId"), None) is not None:
                appended.append({**head, "type": kind, "segmentId": event["segmentId"]})
        self._append(event_id, appended)
        return self._log()

    def _append(self, event_id: int, events: list[dict[str, Any]]) -> None:
        """One change's events, all of `event_id` (none: the revision stays); the oldest beyond `kept` go."""
        if events:
            self.last = event_id
            self.events.extend(events)
            while len(self.events) > self.kept:
                self.floor = self.events.popleft()["eventId"]

    def _log(self) -> dict[str, Any]:
        """The log as published with a feed's document or relayed change."""
        return {"eventId": self.last, "floor": self.floor, "events": list(self.events)}

    def _compare(
        self, event_id: int, features: dict[str, Mapping[str, Any]], segments: dict[int, Mapping[str, Any]]
    ) -> list[dict[str, Any]]:
        head = {"eventId": event_id}
        updated = [
            {**head, "type": "segment-updated", "segment": segment}
            for segment_id, segment in segments.items()
            if self.segments.get(segment_id) != segment
        ]
        for name, feature in features.items():
            before = self.features.get(name)
            if before is not feature and before != feature:  # the same object: kept from the last state
                old = None if before is None else _project(before)
                updated.append({**head, "type": "feature-updated", "feature": feature, "oldProject": old})
        for name, before in self.features.items():
            if name not in features:
                updated.append(
                    {**head, "type": "feature-removed", "featureName": name, "project": _project(before)}
                )
        removed = [
            {**head, "type": "segment-removed", "segmentId": segment_id}
            for segment_id in self.segments
            if segment_id not in segments
        ]
        return updated + removed


def _event(record: Mapping[str, Any]) -> DeltaEvent | None:
    event_id, kind = int(record["eventId"]), record.get("type")
    if kind == "feature-updated":
        feature = record["feature"]
        name, old = str(feature["name"]), record.get("oldProject")
        removed = None if old is None else wire.feature_removed(event_id, name, old)
        updated = wire.feature_updated(event_id, orjson.dumps(feature))
        return DeltaEvent(event_id, None, name, _project(feature), NO_TAGS, old, NO_TAGS, updated, removed)
    if kind == "feature-removed":
        name, old = str(record["featureName"]), str(record["project"])
        removed = wire.feature_removed(event_id, name, old)
        return DeltaEvent(event_id, None, name, None, NO_TAGS, old, NO_TAGS, None, removed)
    if kind == "segment-updated":
        updated = wire.segment_updated(event_id, orjson.dumps(record["segment"]))
        return DeltaEvent(event_id, None, None, None, NO_TAGS, None, NO_TAGS, updated, None)
    if kind == "segment-removed":
        updated = wire.segment_removed(event_id, int(record["segmentId"]))
        return DeltaEvent(event_id, None, None, None, NO_TAGS, None, NO_TAGS, updated, None)
    return None


@dataclass(frozen=True, slots=True)
class FeedLog:
    """A worker's view of one feed's published log."""

    last: int
    floor: int
    events: tuple[DeltaEvent, ...]

    @classmethod
    def read(cls, published: Any, before: FeedLog | None = None) -> FeedLog | None:
        """The log published with a feed's document (None from an edge that published none). Events
        `before` (this worker's previous view of the same log) already has are reused, not parsed again:
        the leader only appends and drops the oldest, so the kept records are a suffix of its events."""
        log = _log_of(published)
        if log is None:
            return None
        records = log.get("events", ())
        known = before.last if before is not None else None
        new = [record for record in records if known is None or int(record["eventId"]) > known]
        old = len(records) - len(new)
        kept = before.events[len(before.events) - old :] if before is not None and old > 0 else ()
        events = tuple(kept) + tuple(e for e in (_event(record) for record in new) if e is not None)
        return cls(int(log["eventId"]), int(log["floor"]), events)

    def after(self, event_id: int) -> tuple[DeltaEvent, ...]:
        return tuple(event for event in self.events if event.event_id > event_id)

    def issued(self, event_id: int) -> bool:
        """Whether this run gave out `event_id` (its first revision, or one of its kept changes'): a reader
        at any other id within the log's range holds an id of an earlier run, and hydrates."""
        if event_id in (self.floor, self.last):
            return True
        return any(event.event_id == event_id for event in self.events)


def _log_of(published: Any) -> Mapping[str, Any] | None:
    log = published.get("delta") if isinstance(published, Mapping) else None
    return log if isinstance(log, Mapping) else None


def published_event_id(published: Any) -> int:
    """The event id of a published revision (0 when it carries no log)."""
    log = _log_of(published)
    return int(log["eventId"]) if log is not None else 0
