"""Edge's three entries of what an edge knows (crates/oss/unleash-edge-persistence, src/lib.rs with its
Redis and S3 persisters), kept in a store of named values: Redis's keys (flagproxy/edge/redis_store.py) or
an S3 bucket's objects (flagproxy/edge/s3_store.py). A backend names its three entries and says how to read
them all and write some; what they hold, when they are written and how trouble is said is here.

- features: Edge's shape, a JSON list of `[environment, client features document]` pairs. The leader syncs
  one feed per environment and project set; an environment's feeds are merged into one document
  (`query.project` says which projects it holds), and a feed is restored from its environment's document,
  cut to its projects, as Edge serves a token from its environment's cache. An Edge and a flagproxy edge
  read each other's features.
- last event ids: Edge's `{environment: id}`, the last delta event id of each environment's feeds
  (flagproxy/edge/changes.py), so delta ids go on from the last run's.
- tokens: the validated tokens, as Edge lists them (`type`, `environment`, `projects`, `status`) but with
  the secret's SHA-256 (`tokenSha256`) in place of the secret: no secret leaves the edge, as with
  --backup-folder. Edge's entries (`token`, the secret) are read too.

Written every 60 s (Edge's `create_persist_data_task`), within a second after a feed or the tokens change,
and at stop; an unchanged write is skipped except the 60-second one, which puts the entries back in a store
that lost them. Read once at start. The store going away costs one log line, and its return one more: the
edge serves from memory and never waits on the store.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import orjson

from flagproxy.edge.persistence import Persistence, Scope
from flagproxy.edge.tokens import ALL_PROJECTS, CLIENT, token_key
from flagproxy.sync.documents import is_features_document

PERSIST_SECONDS = 60.0  # Edge's period
WRITE_SPACING_SECONDS = 1.0  # at most one write a second after changes
# Edge's TokenType names (serde lowercase; its "backend" is Unleash's client token) and back.
EDGE_TYPES = {CLIENT: "backend"}
OUR_TYPES = {"backend": CLIENT, "client": CLIENT, "frontend": "frontend", "admin": "admin"}


class KeyedPersistence(Persistence):
    """A backend gives its entries' names, where it is (`where`, for messages: never a secret), what its
    client raises when the store cannot be used (`trouble`), and `read` / `put`."""

    store = ""  # "Redis", "S3": how the log lines name it
    features_key = tokens_key = event_ids_key = ""
    trouble: tuple[type[BaseException], ...] = (OSError,)

    def __init__(self, where: str, logger: Any) -> None:
        self.where = where
        self.logger = logger
        # What the store held at start by environment, and each feed's latest document, as JSON bytes: the
        # leader serves nothing from them, and bytes take a fraction of the parsed documents' memory.
        self.environments: dict[str, bytes] = {}
        self.saved_tokens: list[dict[str, Any]] | None = None
        self.saved_event_ids: dict[str, int] = {}
        self.documents: dict[Scope, bytes] = {}
        self.event_ids: dict[Scope, int] = {}
        self.tokens: list[dict[str, Any]] | None = None
        self.written: tuple[bytes | None, ...] = (None, None, None)
        self.changed = asyncio.Event()
        self.answering: bool | None = None  # unknown until the first read or write

    async def read(self, keys: tuple[str, ...]) -> list[bytes | None]:
        """Each entry's value, None for one the store does not hold; raises one of `trouble`."""
        raise NotImplementedError

    async def put(self, values: dict[str, bytes]) -> None:
        """Write the entries; raises one of `trouble`."""
        raise NotImplementedError

    # ---- start --------------------------------------------------------------------------------------

    async def load(self) -> None:
        try:
            features, tokens, event_ids = await self.read(
                (self.features_key, self.tokens_key, self.event_ids_key)
            )
        except self.trouble as exc:
            self._answered(exc)
            return
        self._answered(None)
        if features is not None:
            pairs = self._json(self.features_key, features)
            for pair in pairs if isinstance(pairs, list) else ():
                if isinstance(pair, list) and len(pair) == 2 and is_features_document(pair[1]):
                    self.environments[str(pair[0])] = orjson.dumps(pair[1])
        if tokens is not None:
            listed = self._json(self.tokens_key, tokens)
            self.saved_tokens = [
                s for s in map(_saved_token, listed if isinstance(listed, list) else ()) if s
            ]
        if event_ids is not None:
            ids = self._json(self.event_ids_key, event_ids)
            for environment, event_id in ids.items() if isinstance(ids, dict) else ():
                if isinstance(event_id, int) and not isinstance(event_id, bool):
                    self.saved_event_ids[str(environment)] = event_id

    def _json(self, key: str, raw: bytes) -> Any:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            self.logger.warn(f"{key} in {self.where} is not JSON ({exc}); not read")
            return None

    def restore_feed(self, scope: Scope) -> tuple[dict[str, Any], int | None] | None:
        """The feed's flags from its environment's document, if that document holds the feed's projects."""
        raw = self.environments.get(scope[0])
        if raw is None:
            return None
        document = orjson.loads(raw)
        held = _projects(document)
        wanted = set(scope[1])
        if held is not None and ALL_PROJECTS not in held and (ALL_PROJECTS in wanted or not wanted <= held):
            return None
        event_id = self.saved_event_ids.get(scope[0])
        if ALL_PROJECTS in wanted:
            return document, event_id
        features = [f for f in _features(document) if f.get("project", "default") in wanted]
        return {**document, "features": features}, event_id

    def restore_tokens(self) -> Any:
        return self.saved_tokens

    # ---- changes and writes -------------------------------------------------------------------------

    def feed_changed(self, scope: Scope, payload: dict[str, Any], event_id: int) -> None:
        self.documents[scope] = orjson.dumps(payload)
        self.event_ids[scope] = event_id
        self.changed.set()

    def tokens_changed(self, saved: list[dict[str, Any]]) -> None:
        self.tokens = saved
        self.changed.set()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time() + PERSIST_SECONDS
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), max(0.0, due - loop.time()))
            self.changed.clear()
            periodic = loop.time() >= due
            if periodic:
                due = loop.time() + PERSIST_SECONDS
            try:
                await self._write(again=periodic)
            except Exception as exc:  # a bug here must not end the writes for good
                self.logger.error(f"Writing to {self.where} failed unexpectedly: {exc!r}")
            await asyncio.sleep(WRITE_SPACING_SECONDS)

    async def persist(self) -> None:
        await self._write(again=True)

    async def _write(self, *, again: bool) -> None:
        """The entries; nothing when none changed since the last write (unless `again`), and, as Edge,
        never an empty list over what the store holds."""
        environments = self._environments()
        features = orjson.dumps(sorted(environments.items())) if environments else None
        tokens = orjson.dumps([_edge_token(t) for t in self.tokens]) if self.tokens else None
        event_ids = dict(self.saved_event_ids)
        for (environment, _), event_id in self.event_ids.items():
            event_ids[environment] = max(event_id, event_ids.get(environment, 0))
        ids = orjson.dumps(event_ids, option=orjson.OPT_SORT_KEYS) if event_ids else None
        if (features, tokens, ids) == self.written and not again:
            return
        if features is None and tokens is None:
            return
        values = {self.features_key: features, self.tokens_key: tokens, self.event_ids_key: ids}
        try:
            await self.put({key: value for key, value in values.items() if value is not None})
        except self.trouble as exc:
            self._answered(exc)
            return
        self._answered(None)
        self.written = (features, tokens, ids)

    def _environments(self) -> dict[str, dict[str, Any]]:
        """Each environment's document: what the store held at start, with the projects this edge syncs
        replaced by its feeds' latest documents (a feed of every project replaces it whole)."""
        merged = {environment: orjson.loads(raw) for environment, raw in self.environments.items()}
        by_environment: dict[str, list[tuple[tuple[str, ...], dict[str, Any]]]] = {}
        for (environment, projects), raw in self.documents.items():
            by_environment.setdefault(environment, []).append((projects, orjson.loads(raw)))
        for environment, feeds in by_environment.items():
            whole = next((doc for projects, doc in feeds if ALL_PROJECTS in projects), None)
            if whole is not None:
                merged[environment] = {**whole, "query": _query(whole, environment, {ALL_PROJECTS})}
                continue
            synced = {p for projects, _ in feeds for p in projects}
            base = merged.get(environment) or {"version": 2, "features": []}
            held = _projects(base) or set()
            features = {f["name"]: f for f in _features(base) if f.get("project", "default") not in synced}
            segments = {s.get("id"): s for s in _segments(base)}
            for _, document in feeds:
                features.update((f["name"], f) for f in _features(document))
                segments.update((s.get("id"), s) for s in _segments(document))
            held = {ALL_PROJECTS} if ALL_PROJECTS in held else held | synced
            merged[environment] = {
                **feeds[0][1],
                "features": list(features.values()),
                "segments": list(segments.values()),
                "query": _query(feeds[0][1], environment, held),
            }
        return merged

    def _answered(self, trouble: BaseException | None) -> None:
        """One line when the store stops answering, one when it answers again; nothing per write."""
        if trouble is not None and self.answering is not False:
            reason = str(trouble) or type(trouble).__name__
            self.logger.error(
                f"{self.where} cannot be used ({reason}); edge keeps serving what it knows and writes to "
                f"{self.store} again when it answers"
            )
        elif trouble is None and self.answering is False:
            self.logger.warn(f"{self.where} answers again")
        self.answering = trouble is None


def _features(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The document's flags that have a name (a document the store held may hold anything)."""
    listed = document.get("features")
    return (
        [f for f in listed if isinstance(f, dict) and isinstance(f.get("name"), str)]
        if isinstance(listed, list)
        else []
    )


def _segments(document: dict[str, Any]) -> list[dict[str, Any]]:
    listed = document.get("segments")
    return [s for s in listed if isinstance(s, dict)] if isinstance(listed, list) else []


def _projects(document: dict[str, Any]) -> set[str] | None:
    """The projects a document says it holds (`query.project`); None when it does not say."""
    query = document.get("query")
    projects = query.get("project") if isinstance(query, dict) else None
    return {str(p) for p in projects} if isinstance(projects, list) else None


def _query(document: dict[str, Any], environment: str, projects: set[str]) -> dict[str, Any]:
    query = document.get("query")
    return {
        **(query if isinstance(query, dict) else {}),
        "project": sorted(projects),
        "environment": environment,
    }


def _edge_token(saved: dict[str, Any]) -> dict[str, Any]:
    """TokenValidator.saved()'s entry as Edge lists a validated token, its secret's digest for the secret."""
    return {
        "tokenSha256": saved["key"],
        "type": EDGE_TYPES.get(saved["type"], saved["type"]),
        "environment": saved["environment"],
        "projects": saved["projects"],
        "status": "Validated",
    }


def _saved_token(entry: Any) -> dict[str, Any] | None:
    """A tokens entry (ours, or Edge's with the secret) in TokenValidator.saved()'s shape."""
    if not isinstance(entry, dict) or entry.get("status", "Validated") != "Validated":
        return None
    if isinstance(entry.get("tokenSha256"), str):
        key = entry["tokenSha256"]
    elif isinstance(entry.get("token"), str):
        key = token_key(entry["token"]).hex()
    else:
        return None
    kind = OUR_TYPES.get(str(entry.get("type")).lower())
    if kind is None or not isinstance(entry.get("environment"), str):
        return None
    projects = entry.get("projects")
    return {
        "key": key,
        "type": kind,
        "environment": entry["environment"],
        "projects": [str(p) for p in projects] if isinstance(projects, list) else [],
    }
