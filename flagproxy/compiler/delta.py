"""The Unleash delta protocol: a list of events applied in order to a full client features state.

Event types (unleash-types `ClientFeatures::apply_delta_events`): `hydration` replaces everything,
`feature-updated` upserts a feature by name, `feature-removed` drops one, `segment-updated` upserts a
segment by id, `segment-removed` drops one. Unknown event types are ignored.

`DeltaState` keeps the state between delta documents, as a streaming reader does (flagproxy/sync/stream.py):
each event costs a dictionary operation, not a rebuild of the whole state, and `apply` says whether the state
changed at all, so an event that repeats what is held publishes nothing. An updated feature keeps its place
and a new one goes last, as unleash-types and the Node SDK's `saveDelta` order them. `DocumentEncoder` keeps
the state's document as JSON bytes, encoding again only the features events touched.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, cast

import orjson


def _by_name(features: Any) -> dict[str, Any]:
    return {f["name"]: f for f in features or () if isinstance(f, Mapping)}


def _by_id(segments: Any) -> dict[Any, Any]:
    return {s["id"]: s for s in segments or () if isinstance(s, Mapping)}


class DeltaState:
    """Features by name and segments by id, in the order a full document lists them."""

    __slots__ = ("features", "segments")

    def __init__(self, state: Mapping[str, Any] | None = None) -> None:
        self.features: dict[str, Any] = _by_name(state.get("features")) if state else {}
        self.segments: dict[Any, Any] = _by_id(state.get("segments")) if state else {}

    def apply(self, events: Iterable[Any]) -> bool:
        """Apply `events` in order; whether the state is now different from before (a flag added and removed
        again within them is no change). Without a hydration it compares only what the events name (and
        the order of names, when one was removed): a change of one flag among 5000 costs microseconds,
        where copying and comparing every item took about 9 ms of a loaded machine."""
        events = [event for event in events if isinstance(event, Mapping)]
        if any(event.get("type") == "hydration" for event in events):
            return self._apply_whole(events)
        touched: dict[tuple[str, Any], Any] = {}
        order: tuple[list[Any], list[Any]] | None = None
        if any(event.get("type") in ("feature-removed", "segment-removed") for event in events):
            order = (list(self.features), list(self.segments))  # what was removed and added again goes last
        for event in events:
            place = _place(event)
            if place is None:
                continue
            held = self.features if place[0] == "feature" else self.segments
            if place not in touched:
                touched[place] = held.get(place[1], _MISSING)
            self._apply(event)
        for (kind, key), was in touched.items():
            now = (self.features if kind == "feature" else self.segments).get(key, _MISSING)
            if now is not was and (now is _MISSING or was is _MISSING or now != was):
                return True
        return order is not None and order != (list(self.features), list(self.segments))

    def _apply_whole(self, events: list[Mapping[str, Any]]) -> bool:
        before: tuple[list[Any], list[Any]] | None = None
        for event in events:
            if before is not None:
                self._apply(event)
                continue
            held = (list(self.features.items()), list(self.segments.items()))
            if self._apply(event):
                before = held  # what the state was before its first change
        # Order counts: whole-list answers list flags in document order. The values are mostly the same
        # objects, which compare at once.
        return before is not None and before != (list(self.features.items()), list(self.segments.items()))

    def _apply(self, event: Mapping[str, Any]) -> bool:
        kind = event.get("type")
        if kind == "hydration":
            self.features, self.segments = _by_name(event.get("features")), _by_id(event.get("segments"))
            return True
        if kind == "feature-updated" and isinstance(event.get("feature"), Mapping):
            return _put(self.features, event["feature"]["name"], event["feature"])
        if kind == "feature-removed" and isinstance(event.get("featureName"), str):
            return self.features.pop(event["featureName"], None) is not None
        if kind == "segment-updated" and isinstance(event.get("segment"), Mapping):
            return _put(self.segments, event["segment"]["id"], event["segment"])
        if kind == "segment-removed":
            return self.segments.pop(event.get("segmentId"), None) is not None
        return False

    def document(self) -> dict[str, Any]:
        """The state as a full client features document (new lists; the features themselves are shared)."""
        return {
            "version": 2,
            "features": list(self.features.values()),
            "segments": list(self.segments.values()),
        }


def _place(event: Mapping[str, Any]) -> tuple[str, Any] | None:
    """Which feature (by name) or segment (by id) an event other than a hydration changes, as `_apply`
    reads it; None for one it ignores."""
    kind = event.get("type")
    if kind == "feature-updated" and isinstance(event.get("feature"), Mapping):
        return ("feature", event["feature"]["name"])
    if kind == "feature-removed" and isinstance(event.get("featureName"), str):
        return ("feature", event["featureName"])
    if kind == "segment-updated" and isinstance(event.get("segment"), Mapping):
        return ("segment", event["segment"]["id"])
    if kind == "segment-removed":
        return ("segment", event.get("segmentId"))
    return None


def _put(held: dict[Any, Any], key: Any, value: Any) -> bool:
    if held.get(key, _MISSING) == value:
        return False
    held[key] = value
    return True


_MISSING = object()


def apply_delta_events(events: Iterable[Any], state: Mapping[str, Any] | None = None) -> dict[str, Any]:
    held = DeltaState(state)
    held.apply(events)
    return held.document()


class DocumentEncoder:
    """A DeltaState's full document as JSON bytes, equal to `orjson.dumps(state.document())`, for an encode
    of the features the events touched and a join of the rest. `note(events)` after each `state.apply`
    mirrors what the state's dictionary did (an update keeps a flag's place or appends it, a removal pops
    it, a hydration starts over), so the kept bytes stay in the state's order without walking it."""

    __slots__ = ("_encoded", "_touched")

    def __init__(self) -> None:
        self._encoded: dict[str, bytes | None] | None = None  # None: encode everything at the next publish
        # The flags noted as updated since the last `parts`: the only ones it encodes, instead of walking
        # the 5000 kept (a change's patch did that twice, about a millisecond of the loop).
        self._touched: list[str] = []

    def note(self, events: Any) -> None:
        encoded = self._encoded
        for event in events:
            if encoded is None:
                return
            if not isinstance(event, Mapping):
                continue
            kind = event.get("type")
            if kind == "hydration":
                self._encoded = encoded = None
            elif kind == "feature-updated" and isinstance(event.get("feature"), Mapping):
                name = event["feature"]["name"]
                encoded[name] = None  # encoded again from the state at the publish
                self._touched.append(name)
                if len(self._touched) > len(encoded):  # no publish for long: all at the next, unlisted
                    self._encoded = encoded = None
                    self._touched = []
            elif kind == "feature-removed" and isinstance(event.get("featureName"), str):
                encoded.pop(event["featureName"], None)

    def reset(self) -> None:
        """The state was replaced whole (a poll's document)."""
        self._encoded = None
        self._touched = []

    def document(self, state: DeltaState) -> bytes:
        return b"".join(self.parts(state))

    def parts(self, state: DeltaState) -> list[bytes | memoryview]:
        """The document's bytes in pieces, to be joined (`b"".join`): the state as it is now, whatever
        changes after (a served body joined only when asked: flagproxy/instance/patcher.py). An encode
        of the features the events touched and a list of the rest (0.5 ms at 5000 flags before it walked
        only those; benchmarks.apply_cost)."""
        features = state.features
        encoded = self._encoded
        touched: Iterable[str] = self._touched
        if encoded is None or encoded.keys() != features.keys():  # a set comparison, in C
            encoded = touched = dict.fromkeys(features)
        for name in touched:
            if encoded.get(name, b"") is None:  # noted, and not removed since
                encoded[name] = orjson.dumps(features[name]) + b","  # each kept with the comma after it
        self._encoded = encoded
        self._touched = []
        tail = b'],"segments":' + orjson.dumps(list(state.segments.values())) + b"}"
        # One copy of the megabytes: the parts as they are, the last one's comma cut off by a view.
        filled = cast("dict[str, bytes]", encoded)  # every None encoded above
        parts: list[bytes | memoryview] = [b'{"version":2,"features":[', *filled.values(), tail]
        if len(parts) > 2:
            parts[-2] = memoryview(parts[-2])[:-1]
        return parts
