"""`flagproxy proxy --streaming --workers N`: the leader relays each streamed change's events to the workers,
and each worker patches them into the engine it serves, instead of the leader publishing the whole document
for every worker to load again.

- The leader (`EventRelay`, the StreamingSync's `patcher` in the main process): once a state was published
  whole (a hydration: compiled once, loaded by every worker as before), each later change is applied to the
  state and appended, with the revision it makes, to `events.json` in the instance folder (a Publication of
  its own: written whole, renamed, the workers woken), as `[[revision, events], ...]` with the whole
  revision it follows (`base`). After MAX_BATCHES changes the next goes the whole way again (published
  whole, compiled apart), so the file stays small and a late worker replays little.
- A worker (`RelayedChanges`, followed beside the document by flagproxy/instance/follower.py): after it
  installed a whole revision it keeps its document's bytes; at the first relayed change on that base it
  parses them into a DeltaState (once per whole revision) and from then on patches each change in as the
  single process does (flagproxy/instance/patcher.py `ServedPatcher`), at the revision the leader gave it, so
  every worker serves the same revision with the same bytes. A change its patched engine cannot take is
  compiled whole here (rare: MAX_BATCHES keeps the replaced rows under SPARE_ROWS).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from flagproxy.instance.follower import FollowedDocument
from flagproxy.instance.patcher import NOT_TAKEN, PATCHED, UNCHANGED, ServedPatcher
from flagproxy.instance.store import DeltaState, DocumentEncoder, SnapshotStore
from flagproxy.sync.publication import Publication, Published

EVENTS = "events.json"
MAX_BATCHES = 100  # relayed changes on one whole revision before the next is published whole


class EventRelay:
    """The leader's side: the patcher interface StreamingSync calls (flagproxy/sync/stream.py)."""

    def __init__(self, publication: Publication) -> None:
        self.publication = publication
        self.events = Publication(publication.directory, EVENTS)
        self._base: tuple[DeltaState, int] | None = None
        self._batches: list[list[Any]] = []

    def published(self, state: DeltaState, revision: int | None = None) -> None:
        self._base = (state, self.publication.revision if revision is None else revision)
        self._batches = []

    def forget(self) -> None:
        self._base = None
        self._batches = []

    def apply(self, state: DeltaState, events: list[Any]) -> str:
        if any(isinstance(event, dict) and event.get("type") == "hydration" for event in events):
            self.forget()
            return NOT_TAKEN
        if self._base is None or self._base[0] is not state or len(self._batches) >= MAX_BATCHES:
            return NOT_TAKEN
        return PATCHED if state.apply(events) else UNCHANGED

    def serve(self, body_parts: Any, events: list[Any], revision: int | None = None) -> None:
        assert self._base is not None
        self.publication.revision += 1
        self._batches.append([self.publication.revision, events])
        self.events.publish(orjson.dumps(self._batches), "upstream", extra={"base": self._base[1]})


class RelayedChanges:
    """A worker's side: `based(published)` after each whole install, `followed` watched by the follower."""

    def __init__(
        self, store: SnapshotStore, directory: str, *, custom_strategies: Sequence[Any] = (), logger: Any
    ) -> None:
        self.store = store
        self.logger = logger
        self.patcher = ServedPatcher(
            store, Publication(directory), custom_strategies=custom_strategies, logger=logger
        )
        self.followed = FollowedDocument(Publication(directory, EVENTS), self.install)
        self.base: int | None = None
        self.applied = 0  # the revision of the last change applied
        self._document: bytes | None = None  # the base's, parsed at its first relayed change
        self.state: DeltaState | None = None
        self.encoder = DocumentEncoder()

    def based(self, published: Published) -> None:
        """A whole revision is served: relayed changes on it apply from here; the events file is read
        again (it may have come before this revision was loaded)."""
        self.base = self.applied = published.revision
        self._document = bytes(published.document)
        self.state = None
        self.followed.stamp = None

    def install(self, published: Published) -> bool:
        if (
            self.base is None
            or not isinstance(published.extra, dict)
            or published.extra.get("base") != self.base
        ):
            return False  # changes on another whole revision: this one's, or a newer whole, comes
        fresh = [
            (revision, events)
            for revision, events in orjson.loads(published.document)
            if revision > self.applied
        ]
        if not fresh:
            return False
        if self.state is None:
            self.state = DeltaState(orjson.loads(self._document or b"{}"))
            self._document = None
            self.encoder = DocumentEncoder()
            self.patcher.published(self.state, self.base)
        state = self.state
        for revision, events in fresh:
            outcome = self.patcher.apply(state, events)
            if outcome == NOT_TAKEN:
                state.apply(events)
            self.encoder.note(events)
            if outcome == PATCHED:
                self.patcher.serve(self.encoder.parts(state), events, revision)
            elif outcome != UNCHANGED:  # the patched engine could not take it: compiled whole, here
                self.logger.warn(f"Compiling revision {revision} of the features whole in this worker")
                self.store.install(state.document(), "upstream", revision=revision)
                self.patcher.published(state, revision)
            self.applied = revision
        return True
