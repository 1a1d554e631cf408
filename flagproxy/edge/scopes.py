"""One compiled snapshot per environment and project set, fed by one upstream fetch per sync token.

A *feed* is what one client token from `--tokens` (or, with `--dynamic`, a token first seen on a request)
reads upstream: the features of its environment and projects, polled with one conditional request per
interval (flagproxy/sync/poller.py, flagproxy/sync/upstream.py). A *served scope* is what a class of
requests sees: the feed's document cut down to a token's projects and compiled into its own snapshot
store (flagproxy/instance/store.py), so evaluating never filters per request and a token never sees another
environment's flags or another project's. Served scopes are made the first time a token needs one and
are recompiled whenever their feed changes.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from flagproxy.edge.tokens import ALL_PROJECTS, EdgeToken
from flagproxy.http.etag import weak_etag
from flagproxy.http.response_cache import ResponseCache
from flagproxy.instance.store import ServedSnapshot, SnapshotStore
from flagproxy.sync.backup import FileStorageProvider
from flagproxy.sync.documents import check_document

Scope = tuple[str, tuple[str, ...]]  # (environment, sorted projects or ("*",))
PREFIX_CACHE = 64  # namePrefix answers kept per served scope
# Each served scope keeps its own response cache (one shared cache would be emptied whenever requests of
# two scopes alternate: it holds one snapshot's answers). 8 MiB each for the first 16 scopes bounds them
# to 128 MiB; scopes made after those evaluate every request.
SCOPE_CACHE_BYTES = 8 * 1024 * 1024
CACHED_SCOPES = 16


def scope_name(scope: Scope) -> str:
    return f"{scope[0]}:{','.join(scope[1])}"


def covers(outer: Scope, inner: Scope) -> bool:
    if outer[0] != inner[0]:
        return False
    return ALL_PROJECTS in outer[1] or (ALL_PROJECTS not in inner[1] and set(inner[1]) <= set(outer[1]))


def only_projects(payload: Mapping[str, Any], projects: tuple[str, ...]) -> dict[str, Any]:
    """The features document with only `projects`' features (all of them for `*`); segments stay."""
    if ALL_PROJECTS in projects or not isinstance(payload.get("features"), list):
        return dict(payload)
    wanted = set(projects)
    features = [f for f in payload["features"] if f.get("project", "default") in wanted]
    return {**payload, "features": features}


class ServedScope:
    """A snapshot store for one scope, plus the per-revision answers of the client API's filters."""

    def __init__(self, scope: Scope, source: Scope, logger: Any, cache_bytes: int = 0) -> None:
        self.scope = scope
        self.source = source  # the feed it is cut from
        self.store = SnapshotStore(logger=logger)
        self.cache = ResponseCache(cache_bytes) if cache_bytes else None
        self.features: list[dict[str, Any]] = []
        self.prefixed: OrderedDict[tuple[int, str], tuple[bytes, str]] = OrderedDict()

    def install(self, payload: Mapping[str, Any]) -> None:
        document = only_projects(payload, self.scope[1])
        self.store.install(document, scope_name(self.source))
        self.features = [f for f in document.get("features", []) if isinstance(f, dict)]
        self.prefixed.clear()

    @property
    def current(self) -> ServedSnapshot | None:
        return self.store.current

    def with_prefix(self, snapshot: ServedSnapshot, prefix: str) -> tuple[bytes, str]:
        """The features body limited to names starting with `prefix`, and its ETag (kept per revision)."""
        key = (snapshot.revision, prefix)
        hit = self.prefixed.get(key)
        if hit is None:
            document = orjson.loads(snapshot.features_body)
            document["features"] = [
                f for f in document["features"] if str(f.get("name", "")).startswith(prefix)
            ]
            body = orjson.dumps(document)
            hit = self.prefixed[key] = (body, weak_etag(body))
            while len(self.prefixed) > PREFIX_CACHE:
                self.prefixed.popitem(last=False)
        return hit

    def feature(self, name: str) -> dict[str, Any] | None:
        return next((f for f in self.features if f.get("name") == name), None)


class Scopes:
    """Every feed's latest document and every served scope; what the routes and the sync share."""

    def __init__(self, logger: Any, backup_folder: str | None = None) -> None:
        self.logger = logger
        self.documents: dict[Scope, dict[str, Any]] = {}  # feed scope -> latest document
        self.feeds: set[Scope] = set()  # scopes something syncs (hydrated or not)
        self.served: dict[Scope, ServedScope] = {}
        self.hydrated: dict[Scope, asyncio.Event] = {}
        self.backup = FileStorageProvider(backup_folder) if backup_folder else None
        self.on_change: list[Callable[[Scope], None]] = []

    # ---- feeds ----------------------------------------------------------------------------------------

    def add_feed(self, scope: Scope) -> None:
        self.feeds.add(scope)
        self.hydrated.setdefault(scope, asyncio.Event())

    def feed_for(self, scope: Scope) -> Scope | None:
        """The narrowest feed that covers `scope`, or None."""
        found = [feed for feed in self.feeds if covers(feed, scope)]
        return min(found, key=lambda feed: (ALL_PROJECTS in feed[1], len(feed[1])), default=None)

    def publish(self, feed: Scope, payload: dict[str, Any], *, save: bool = True) -> bool:
        """A feed's new document: compile every scope served from it; False (nothing changes) when the
        document does not compile."""
        try:
            check_document(payload)  # before anything of it is kept, even with no scope served from it yet
            for served in [s for s in self.served.values() if s.source == feed]:
                served.install(payload)
        except ValueError as exc:
            self.logger.error(f"The features of {scope_name(feed)} could not be used: {exc}")
            return False
        self.documents[feed] = payload
        self.hydrated.setdefault(feed, asyncio.Event()).set()
        if save and self.backup is not None:
            self.backup.set(_backup_key(feed), {"scope": [feed[0], list(feed[1])], "features": payload})
        return True

    def restore(self, feed: Scope) -> bool:
        """The feed's last saved document from --backup-folder, if there is one."""
        if self.backup is None:
            return False
        saved = self.backup.get(_backup_key(feed))
        if not isinstance(saved, dict) or not isinstance(saved.get("features"), dict):
            return False
        return self.publish(feed, saved["features"], save=False)

    @property
    def ready(self) -> bool:
        return all(scope in self.documents for scope in self.feeds)

    # ---- what requests read ---------------------------------------------------------------------------

    def serve(self, token: EdgeToken) -> ServedScope | None:
        """The served scope of a validated token (made on first use), or None when no feed covers it."""
        scope = token.scope
        served = self.served.get(scope)
        if served is not None:
            return served
        feed = self.feed_for(scope)
        if feed is None:
            return None
        cache_bytes = SCOPE_CACHE_BYTES if len(self.served) < CACHED_SCOPES else 0
        served = ServedScope(scope, feed, self.logger, cache_bytes)
        document = self.documents.get(feed)
        if document is not None:
            served.install(document)
        self.served[scope] = served
        return served


def _backup_key(feed: Scope) -> str:
    # A file name from the scope, never from a token.
    return "edge-" + hashlib.sha256(scope_name(feed).encode()).hexdigest()[:20]
