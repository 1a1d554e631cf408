"""The Unleash delta protocol: a list of events applied in order to a full client features state.

Event types (unleash-types `ClientFeatures::apply_delta_events`): `hydration` replaces everything,
`feature-updated` upserts a feature by name, `feature-removed` drops one, `segment-updated` upserts a
segment by id, `segment-removed` drops one. Unknown event types are ignored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def apply_delta_events(events: Iterable[Any], state: Mapping[str, Any] | None = None) -> dict[str, Any]:
    features: dict[str, Any] = {}
    segments: dict[Any, Any] = {}
    if state:
        features = {f["name"]: f for f in state.get("features") or () if isinstance(f, Mapping)}
        segments = {s["id"]: s for s in state.get("segments") or () if isinstance(s, Mapping)}
    for event in events:
        if not isinstance(event, Mapping):
            continue
        kind = event.get("type")
        if kind == "hydration":
            features = {f["name"]: f for f in event.get("features") or () if isinstance(f, Mapping)}
            segments = {s["id"]: s for s in event.get("segments") or () if isinstance(s, Mapping)}
        elif kind == "feature-updated" and isinstance(event.get("feature"), Mapping):
            features[event["feature"]["name"]] = event["feature"]
        elif kind == "feature-removed" and isinstance(event.get("featureName"), str):
            features.pop(event["featureName"], None)
        elif kind == "segment-updated" and isinstance(event.get("segment"), Mapping):
            segments[event["segment"]["id"]] = event["segment"]
        elif kind == "segment-removed":
            segments.pop(event.get("segmentId"), None)
    return {"version": 2, "features": list(features.values()), "segments": list(segments.values())}
