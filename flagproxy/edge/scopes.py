"""What a worker serves: one compiled snapshot per environment and project set, cut from the leader's feeds.

The instance's leader publishes each feed's document (flagproxy/edge/feeds.py); every worker follows the
list of feeds and each feed's file (flagproxy/instance/follower.py). A *served scope* is what a class of
requests sees: a feed's document cut down to a token's projects and compiled into its own snapshot
store (flagproxy/instance/store.py), so evaluating never filters per request and a token never sees another
environment's flags or another project's. A scope that is its feed's whole document loads the image the
leader compiled; a narrower one compiles its cut. Served scopes are made the first time a token needs one
and are installed anew whenever their feed's revision changes, with the feed's revision number, so every
worker answers the same revision. A streamed feed's changes after its last whole revision come as their
events instead (flagproxy/edge/relayed.py): each served scope patches them into its engine
(flagproxy/instance/relay.py `RelayedChanges`), at the revision the leader gave them.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson

from flagproxy.edge.changes import DEFAULT_PROJECT, FeedLog, published_event_id
from flagproxy.edge.feeds import Scope, covers, events_file, feed_file, index_stamp, read_index, scope_name
from flagproxy.edge.relayed import narrower
from flagproxy.edge.tokens import ALL_PROJECTS, EdgeToken
from flagproxy.http import delta as wire
from flagproxy.http.delta import NO_TAGS, Batch, Reader, in_scope
from flagproxy.http.etag import weak_etag
from flagproxy.instance.follower import FollowedDocument, install_published
from flagproxy.instance.relay import RelayedChanges
from flagproxy.instance.response_cache import ResponseCache
from flagproxy.instance.store import ServedSnapshot, SnapshotStore
from flagproxy.sync.publication import Publication, Published

PREFIX_CACHE = 64  # namePrefix answers (and delta hydrations) kept per served scope
# Each served scope keeps its own response cache (one shared cache would be emptied whenever requests of
# two scopes alternate: it holds one snapshot's answers). 8 MiB each for the first 16 scopes bounds them
# to 128 MiB; scopes made after those evaluate every request.
SCOPE_CACHE_BYTES = 8 * 1024 * 1024
CACHED_SCOPES = 16


def only_projects(payload: Mapping[str, Any], projects: tuple[str, ...]) -> dict[str, Any]:
    """The features document with only `projects`' features (all of them for `*`); segments stay."""
    if ALL_PROJECTS in projects or not isinstance(payload.get("features"), list):
        return dict(payload)
    wanted = set(projects)
    features = [f for f in payload["features"] if f.get("project", "default") in wanted]
    return {**payload, "features": features}


class ServedScope:
    """A snapshot store for one scope, plus the per-revision answers of the client API's filters."""

    def __init__(
        self, scope: Scope, source: Scope, logger: Any, cache_bytes: int = 0, directory: str = ""
    ) -> None:
        self.scope = scope
        self.source = source  # the feed it is cut from
        self.logger = logger
        self.store = SnapshotStore(logger=logger)
        # The feed's streamed changes on its last whole revision (flagproxy/edge/relayed.py), patched in.
        whole = ALL_PROJECTS in scope[1]
        self.relayed = RelayedChanges(
            self.store,
            directory,
            logger=logger,
            name=events_file(source),
            cut=None if whole else lambda payload: only_projects(payload, scope[1]),
            narrow=None if whole else narrower(scope[1]),
        )
        self.cache = ResponseCache(cache_bytes) if cache_bytes else None
        self.features: tuple[int, dict[str, dict[str, Any]]] | None = None  # revision, name -> flag
        self.prefixed: OrderedDict[tuple[int, str], tuple[bytes, str]] = OrderedDict()
        self.event_id = 0  # the delta event id of the installed revision (flagproxy/edge/changes.py)
        self.hydrations: OrderedDict[tuple[int, Any, Any], bytes] = OrderedDict()

    def install(self, published: Published) -> bool:
        """A new revision of the feed: its image when this scope is the whole feed, else the cut compiled."""
        if self.scope == self.source:
            installed = install_published(self.store, published, self.logger)
        else:
            try:
                document = only_projects(orjson.loads(published.document), self.scope[1])
                self.store.install(
                    document, published.source, revision=published.revision, at_ms=published.published_ms
                )
                installed = True
            except (ValueError, orjson.JSONDecodeError) as exc:
                self.logger.error(f"The features of {scope_name(self.scope)} could not be used: {exc}")
                installed = False
        if installed:
            self.event_id = published_event_id(published.extra)
            if isinstance(published.extra, Mapping) and published.extra.get("streamed"):
                self.relayed.based(published)  # changes relayed on it come (it keeps a copy of the document)
        self.prefixed.clear()
        self.hydrations.clear()
        return installed

    def patch(self, applied: bool, published: Published) -> bool:
        """After `relayed` applied (or not) the changes in `published`: the scope is at their last id."""
        if applied:
            self.event_id = published_event_id(published.extra)
        return applied

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

    def hydration(self, reader: Reader) -> bytes:
        """The delta document of one `hydration` event of the installed revision for `reader`: its flags
        (already cut to the token's projects; the request's `project` and `namePrefix`) and every segment.
        Kept per revision and filter, so every stream and poll of one reader shares one copy."""
        key = (self.event_id, reader.projects, reader.name_prefix)
        hit = self.hydrations.get(key)
        if hit is None:
            snapshot = self.current
            document = orjson.loads(snapshot.features_body) if snapshot is not None else {}
            features = [
                f
                for f in document.get("features", ())
                if in_scope(reader, str(f.get("project") or DEFAULT_PROJECT), str(f.get("name")), NO_TAGS)
            ]
            event = wire.hydration(self.event_id, features, document.get("segments", []))
            hit = self.hydrations[key] = wire.document([event])
            while len(self.hydrations) > PREFIX_CACHE:
                self.hydrations.popitem(last=False)
        return hit

    def feature(self, snapshot: ServedSnapshot, name: str) -> dict[str, Any] | None:
        """One flag of the snapshot's features body (read once per revision)."""
        if self.features is None or self.features[0] != snapshot.revision:
            listed = orjson.loads(snapshot.features_body).get("features", [])
            flags = {str(f.get("name")): f for f in listed if isinstance(f, dict)}
            self.features = (snapshot.revision, flags)
        return self.features[1].get(name)


class Scopes:
    """The feeds this worker follows and the scopes it serves from them; what the routes read."""

    def __init__(
        self, directory: str, logger: Any, on_changes: Callable[[Batch], None] | None = None
    ) -> None:
        self.directory = directory
        self.logger = logger
        self.feeds: dict[Scope, FollowedDocument] = {}
        self.relays: dict[Scope, FollowedDocument] = {}  # each feed's events file (flagproxy/edge/relayed.py)
        self.served: dict[Scope, ServedScope] = {}
        self.index: tuple[int, int] | None = None
        self.logs: dict[Scope, FeedLog] = {}  # each feed's delta log, as last published
        self.on_changes = on_changes  # new delta events of a feed, for this worker's open streams

    # ---- following the leader (flagproxy/instance/follower.py) ----------------------------------------

    def documents(self) -> Iterable[FollowedDocument]:
        """Every feed's published file and events file (in that order: the events follow a whole
        revision), the leader's list read again when it changed."""
        self._read_index()
        return [followed for feed in self.feeds for followed in (self.feeds[feed], self.relays[feed])]

    def _read_index(self) -> None:
        stamp = index_stamp(self.directory)
        if stamp is None or stamp == self.index:
            return
        self.index = stamp
        for feed in read_index(self.directory) or ():
            if feed not in self.feeds:
                publication = Publication(self.directory, feed_file(feed))
                self.feeds[feed] = FollowedDocument(publication, functools.partial(self._install, feed))
                self.relays[feed] = FollowedDocument(
                    Publication(self.directory, events_file(feed)),
                    functools.partial(self._relayed, feed),
                    functools.partial(self._relayed_serving, feed),
                )

    def _install(self, feed: Scope, published: Published) -> bool:
        installed = True
        for served in [s for s in self.served.values() if s.source == feed]:
            installed = served.install(published) and installed
        self.relays[feed].stamp = None  # changes relayed on this revision may have come before it
        self._new_log(feed, published)
        return installed

    def _relayed(self, feed: Scope, published: Published) -> bool:
        """Changes relayed on the feed's last whole revision: patched into each scope cut from it."""
        applied = False
        for served in [s for s in self.served.values() if s.source == feed]:
            applied = served.patch(served.relayed.install(published), published) or applied
        self._new_log(feed, published)
        return applied

    async def _relayed_serving(self, feed: Scope, published: Published) -> bool:
        """`_relayed` on a serving loop (a scope's first change on a revision parses its base in a thread)."""
        applied = False
        for served in [s for s in self.served.values() if s.source == feed]:
            applied = served.patch(await served.relayed.install_serving(published), published) or applied
        self._new_log(feed, published)
        return applied

    def _new_log(self, feed: Scope, published: Published) -> None:
        """The feed's log published with this revision; its new events to the open streams."""
        before = self.logs.get(feed)
        if before is not None and published_event_id(published.extra) <= before.last:
            return
        log = FeedLog.read(published.extra, before)
        if log is None:
            return
        self.logs[feed] = log
        if before is not None and self.on_changes is not None:
            # A reader behind the log's floor lost events the log dropped (a worker that missed revisions
            # while the leader published many): it catches up instead.
            after = max(before.last, log.floor)
            self.on_changes(Batch(log.after(before.last), log.last, feed, after))

    @property
    def loaded(self) -> bool:
        """Whether every feed listed is served at its published revision (or the last one tried)."""
        self._read_index()
        return self.index is not None and all(followed.loaded for followed in self.feeds.values())

    def feed_for(self, scope: Scope) -> Scope | None:
        """The narrowest feed that covers `scope`, or None."""
        found = [feed for feed in self.feeds if covers(feed, scope)]
        return min(found, key=lambda feed: (ALL_PROJECTS in feed[1], len(feed[1])), default=None)

    # ---- what requests read ---------------------------------------------------------------------------

    def serve(self, token: EdgeToken) -> ServedScope | None:
        """The served scope of a validated token (made on first use), or None when no feed covers it."""
        scope = token.scope
        served = self.served.get(scope)
        if served is not None:
            return served
        feed = self.feed_for(scope)
        if feed is None:
            self._read_index()  # a feed the leader added since this worker last looked
            feed = self.feed_for(scope)
            if feed is None:
                return None
        cache_bytes = SCOPE_CACHE_BYTES if len(self.served) < CACHED_SCOPES else 0
        served = ServedScope(scope, feed, self.logger, cache_bytes, self.directory)
        published = self.feeds[feed].publication.read()
        if published is not None and served.install(published):
            relayed = self.relays[feed].publication.read()  # the changes since, if it is streamed
            if relayed is not None:
                served.patch(served.relayed.install(relayed), relayed)
        self.served[scope] = served
        return served
