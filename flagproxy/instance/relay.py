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

The edge relays each streamed feed the same way, one events file per feed (flagproxy/edge/relayed.py):
its leader adds the feed's delta log to what it publishes (`extra`), and each of its served scopes cut
from the feed is a `RelayedChanges` of its own, reading the feed's base cut to its projects (`cut`) and
each change's events narrowed to them (`narrow`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import orjson

from flagproxy.disk import disk_writer
from flagproxy.instance.follower import FollowedDocument
from flagproxy.instance.patcher import NOT_TAKEN, PATCHED, UNCHANGED, ServedPatcher
from flagproxy.instance.store import DeltaState, DocumentEncoder, SnapshotStore
from flagproxy.sync.publication import Publication, Published

EVENTS = "events.json"
MAX_BATCHES = 100  # relayed changes on one whole revision before the next is published whole


class EventRelay:
    """The leader's side: the patcher interface StreamingSync calls (flagproxy/sync/stream.py)."""

    serves_body = False  # `serve` relays the events: the stream need not build the body's pieces for it

    def __init__(self, publication: Publication, name: str = EVENTS) -> None:
        self.publication = publication
        self.events = Publication(publication.directory, name)
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
        extra = {"base": self._base[1], **self.extra(events)}
        # On the process's writer thread (flagproxy/disk.py: a serving loop never waits on the disk), after
        # the whole revision it builds on; each file holds every change since it, so one that fails to be
        # written is made good by the next.
        batches = orjson.dumps(self._batches)
        disk_writer().later(partial(self.events.publish, batches, "upstream", extra=extra))

    def extra(self, events: list[Any]) -> dict[str, Any]:
        """What else goes in the events file's header with this change (the edge: the feed's delta log)."""
        return {}


class RelayedChanges:
    """A worker's side: `based(published)` after each whole install, `followed` watched by the follower."""

    def __init__(
        self,
        store: SnapshotStore,
        directory: str,
        *,
        custom_strategies: Sequence[Any] = (),
        logger: Any,
        name: str = EVENTS,
        cut: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        narrow: Callable[[DeltaState, list[Any]], list[Any]] | None = None,
    ) -> None:
        self.store = store
        self.logger = logger
        self.patcher = ServedPatcher(
            store, Publication(directory), custom_strategies=custom_strategies, logger=logger
        )
        self.followed = FollowedDocument(Publication(directory, name), self.install, self.install_serving)
        # What this store serves of the relayed document: the base cut (`cut`) and each change's events
        # narrowed to it given the state before them (`narrow`); the whole of both by default.
        self.cut = cut
        self.narrow = narrow
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

    def _on_base(self, published: Published) -> bool:
        on = published.extra.get("base") if isinstance(published.extra, dict) else None
        return self.base is not None and on == self.base

    async def install_serving(self, published: Published) -> bool:
        """`install` on a serving loop: the base's document parsed and encoded feature by feature in a
        thread (about 55 ms at 5000 flags; in a thread the loop gets the GIL back between the encodes,
        though not during the one parse)."""
        if self.state is None and self._document is not None and self._on_base(published):
            base = self.base
            state, encoder = await asyncio.to_thread(_read_base, self._document, self.cut)
            if self.base == base and self.state is None:  # no other whole revision came meanwhile
                self._take(state, encoder)
        return self.install(published)

    def _take(self, state: DeltaState, encoder: DocumentEncoder) -> None:
        assert self.base is not None
        self.state, self.encoder, self._document = state, encoder, None
        self.patcher.published(state, self.base)

    def install(self, published: Published) -> bool:
        if not self._on_base(published):
            return False  # changes on another whole revision: this one's, or a newer whole, comes
        batches = orjson.loads(published.document)
        fresh = [(revision, events) for revision, events in batches if revision > self.applied]
        if not fresh:
            return False
        if self.state is None:
            self._take(*_read_base(self._document or b"{}", self.cut))
        state = self.state
        assert state is not None
        for revision, relayed in fresh:
            events = relayed if self.narrow is None else self.narrow(state, relayed)
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


def _read_base(
    document: bytes, cut: Callable[[dict[str, Any]], dict[str, Any]] | None = None
) -> tuple[DeltaState, DocumentEncoder]:
    """A whole revision's document (`cut`, if given) as a DeltaState, and its encoder with every feature
    encoded."""
    payload = orjson.loads(document)
    state, encoder = DeltaState(payload if cut is None else cut(payload)), DocumentEncoder()
    encoder.parts(state)
    return state, encoder
