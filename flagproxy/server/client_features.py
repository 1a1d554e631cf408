"""The client API payload (`GET /api/client/features`), in the Unleash wire format, and its byte cache.

What a proxy or server SDK reads: version 2, features with strategies, constraints, parameters (strings),
variants and dependencies; segments at the top level, or inlined into strategy constraints for SDKs that
predate segments (no `Unleash-Client-Spec` header, as Unleash decides). Disabled strategies and archived
flags are never sent (SPEC.md, decision E2). The bytes for one query are built once per data revision.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import orjson

from flagproxy.http.delta import in_scope
from flagproxy.server.storage.catalog import Catalog


@dataclass(frozen=True)
class ClientQuery:
    """Everything that decides the payload: the token's scope plus the request's filters."""

    projects: tuple[str, ...] | None  # None: every project
    environment: str
    name_prefix: str | None = None
    tags: tuple[tuple[str, str], ...] = ()
    inline_segments: bool = False

    @property
    def query_hash(self) -> str:
        return hashlib.sha1(repr(self).encode(), usedforsecurity=False).hexdigest()[:8]


@dataclass(frozen=True)
class ClientPayload:
    revision: int
    body: bytes
    etag: str


def _strategy_wire(strategy: dict[str, Any], segments: dict[int, dict[str, Any]], inline: bool) -> dict:
    constraints = list(strategy["constraints"])
    wire: dict[str, Any] = {"name": strategy["name"], "constraints": constraints}
    wire["parameters"] = strategy["parameters"]
    wire["variants"] = strategy["variants"]
    if strategy["segments"]:
        if inline:
            for segment_id in strategy["segments"]:
                constraints.extend(segments[segment_id]["constraints"] if segment_id in segments else [])
        else:
            wire["segments"] = strategy["segments"]
    return wire


def selected(catalog: Catalog, query: ClientQuery) -> list[dict[str, Any]]:
    """The catalog's features the query's projects, name prefix and tags choose, in catalog order."""
    return [
        feature
        for feature in catalog.features
        if in_scope(query, feature["project"], feature["name"], tag_pairs(catalog, feature["name"]))
    ]


def tag_pairs(catalog: Catalog, name: str) -> frozenset[tuple[str, str]]:
    return frozenset((tag["type"], tag["value"]) for tag in catalog.tags.get(name, []))


def feature_wire(catalog: Catalog, feature: dict[str, Any], environment: str, inline: bool) -> dict[str, Any]:
    """One feature as the client API serves it in `environment`: the wire shape both the full document and
    the delta events carry."""
    name = feature["name"]
    state = catalog.feature_environments.get((name, environment))
    strategies = [s for s in catalog.strategies.get((name, environment), []) if not s["disabled"]]
    wire: dict[str, Any] = {
        "name": name,
        "type": feature["type"],
        "description": feature["description"],
        "project": feature["project"],
        "enabled": bool(state and state["enabled"]),
        "stale": bool(feature["stale"]),
        "impressionData": bool(feature["impression_data"]),
        "strategies": [_strategy_wire(s, catalog.segments, inline) for s in strategies],
        "variants": state["variants"] if state else [],
    }
    if name in catalog.parents:
        wire["dependencies"] = catalog.parents[name]
    return wire


def segment_wire(segment: dict[str, Any]) -> dict[str, Any]:
    return {"id": segment["id"], "name": segment["name"], "constraints": segment["constraints"]}


def build(catalog: Catalog, query: ClientQuery, revision: int) -> ClientPayload:
    features = []
    used_segments: set[int] = set()
    for feature in selected(catalog, query):
        wire = feature_wire(catalog, feature, query.environment, query.inline_segments)
        for strategy in wire["strategies"]:
            used_segments.update(strategy.get("segments", ()))
        features.append(wire)

    query_hash = query.query_hash
    etag = f'"{query_hash}:{revision}:v1"'
    query_json: dict[str, Any] = {
        "project": list(query.projects) if query.projects is not None else ["*"],
        "environment": query.environment,
        "inlineSegmentConstraints": query.inline_segments,
    }
    if query.name_prefix:
        query_json["namePrefix"] = query.name_prefix
    if query.tags:
        query_json["tag"] = [[tag_type, value] for tag_type, value in query.tags]
    payload: dict[str, Any] = {"version": 2, "features": features, "query": query_json}
    if not query.inline_segments:
        payload["segments"] = [
            segment_wire(catalog.segments[segment_id])
            for segment_id in sorted(used_segments)
            if segment_id in catalog.segments
        ]
    payload["meta"] = {"revisionId": revision, "etag": etag, "queryHash": query_hash}
    return ClientPayload(revision, orjson.dumps(payload), etag)


class PayloadCache:
    """Per-worker cache of finished payloads, valid for one data revision, bounded in entries."""

    def __init__(self, max_entries: int = 256) -> None:
        self._max_entries = max_entries
        self._payloads: OrderedDict[ClientQuery, ClientPayload] = OrderedDict()
        self._catalog: tuple[int, Catalog] | None = None

    def get(self, query: ClientQuery, revision: int) -> ClientPayload | None:
        payload = self._payloads.get(query)
        if payload is None or payload.revision != revision:
            return None
        self._payloads.move_to_end(query)
        return payload

    def catalog_for(self, revision: int) -> Catalog | None:
        """The catalog already read for this revision, shared by every query built from it."""
        if self._catalog is not None and self._catalog[0] == revision:
            return self._catalog[1]
        return None

    def put(self, query: ClientQuery, payload: ClientPayload, catalog: Catalog) -> None:
        self._catalog = (payload.revision, catalog)
        self._payloads[query] = payload
        self._payloads.move_to_end(query)
        while len(self._payloads) > self._max_entries:
            self._payloads.popitem(last=False)
