"""A streamed change patched into the served engine on the serving loop of `flagproxy proxy --streaming
--workers 1`, instead of the whole document published, compiled apart and loaded again.

The sync streams on the loop that answers requests (flagproxy/sync/stream.py). A hydration (and whatever
the patcher cannot take) still goes the whole way: published, compiled in the compile process and loaded by
the follower between requests (flagproxy/instance/follower.py). Once the follower serves the revision
published from the streamed state as it still is (`published`), the patcher adopts the engine it loaded
(`IncrementalEngine.adopt`); from then on each `unleash-updated` is applied by `apply`: the flags it touches
are compiled alone and patched into that engine (flagproxy/compiler/incremental.py), and `serve` swaps the
patched engine in with the features body in pieces, joined only when a client asks for it
(flagproxy/instance/store.py `install_patched`). Nothing is published: the publication's revision moves
with each patch (so a later whole publish goes on from it), and the sync writes the backup at most once a
second (flagproxy/sync/service.py).

Answers: the patched engine answers as the whole build of the same state (tests/engine/test_incremental.py;
tests/demo/test_streaming_upstream.py holds a streaming proxy equal to a polling one after random admin
changes). An edit no flag reads (a description) keeps the engine and the response cache; the features body
and its ETag are new. A change that would outgrow the patched tables, or any hydration, drops the patched
engine: that state goes the whole way, and is adopted again once served.

With `--workers N` each worker runs one on the changes the leader relays (flagproxy/instance/relay.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from flagproxy.instance.store import REMOTE_ADDRESS, DeltaState, IncrementalEngine, SnapshotStore
from flagproxy.sync.publication import Publication

# Flags an engine may have replaced beyond its own count before a change goes the whole way again: a small
# set of flags (a few dozen) would otherwise be compiled apart every few changes. The engine holds at most
# this many flags' rows more than twice its own.
SPARE_ROWS = 1000

# What `apply` did with the events.
NOT_TAKEN = "not_taken"  # nothing applied: the caller applies them and publishes the whole state
UNCHANGED = "unchanged"  # applied, the state is as it was
PATCHED = "patched"  # applied and patched: the caller calls `serve` with the state's body
WHOLE = "whole"  # applied to the state, the engine dropped: the caller publishes the whole state


class ServedPatcher:
    serves_body = True  # `serve` swaps in the body's pieces the stream hands it

    def __init__(
        self,
        store: SnapshotStore,
        publication: Publication,
        *,
        custom_strategies: Sequence[Any] = (),
        logger: Any = None,
    ) -> None:
        self.store = store
        self.publication = publication
        self.held = IncrementalEngine(
            custom_strategies=custom_strategies, logger=logger, whole_builds=False, spare_rows=SPARE_ROWS
        )
        self._pending: tuple[DeltaState, int] | None = None  # a state published whole, and its revision
        self._same_answers = False

    def published(self, state: DeltaState, revision: int | None = None) -> None:
        """`state`, unchanged since, was just published whole (at `revision`, by default the
        publication's last): adopted once the follower serves that revision."""
        self._pending = (state, self.publication.revision if revision is None else revision)

    def forget(self) -> None:
        """The state changed outside `apply` (applied whole, or replaced by a poll)."""
        self._pending = None
        self.held.engine = None

    def _adopted(self, state: DeltaState) -> bool:
        if self.held.engine is not None and self.held.state is state:
            return True
        pending, current = self._pending, self.store.current
        if pending is None or pending[0] is not state or current is None or current.revision != pending[1]:
            return False
        self.held.adopt(state, current.evaluate_all_body.__self__)
        self._pending = None
        return True

    def apply(self, state: DeltaState, events: list[Any]) -> str:
        """Apply `events` (one `unleash-updated`'s, checked) to `state` and the served engine, if the
        engine served is the one built from `state` as it is; what was done (NOT_TAKEN, UNCHANGED,
        PATCHED or WHOLE)."""
        if any(isinstance(event, dict) and event.get("type") == "hydration" for event in events):
            self.forget()
            return NOT_TAKEN
        if not self._adopted(state):
            return NOT_TAKEN
        replaced = self.held.apply(events)
        if self.held.engine is None:
            return WHOLE
        if not self.held.state_changed:
            return UNCHANGED
        self._same_answers = not replaced
        return PATCHED

    def serve(
        self, body_parts: list[bytes | memoryview], events: list[Any], revision: int | None = None
    ) -> None:
        """Swap the patched engine in, its features body in `body_parts` (the state's, as after `apply`), at
        `revision` (by default the publication's next)."""
        current = self.store.current
        # Conservative, as the store's scan of a whole body: once any flag or segment mentions it, it stays
        # until the next whole load.
        reads = current is None or current.reads_remote_address or REMOTE_ADDRESS in orjson.dumps(events)
        if revision is None:
            self.publication.revision += 1
            revision = self.publication.revision
        self.store.install_patched(
            self.held.engine,
            body_parts,
            "upstream",
            revision=revision,
            reads_remote_address=reads,
            same_answers=self._same_answers,
        )
