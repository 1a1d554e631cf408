"""`flagproxy edge --streaming`: each streamed change of a feed goes to the workers as its events, and each
worker patches them into the engines it serves, instead of the whole feed being compiled, compared with
the last document, published and loaded again for every change (at 5000 flags a 3.7 MB file per change).

The mechanism is the proxy's (flagproxy/instance/relay.py, flagproxy/instance/patcher.py), one events file
per feed (`events-<scope key>.json` beside the feed's file):

- The leader (`FeedRelay`, the feed's StreamingSync `patcher`, flagproxy/edge/sync.py): a hydration (and
  whatever the relay does not take: every MAX_BATCHES-th change) is published whole as before
  (flagproxy/edge/feeds.py); each later change is applied to the stream's state, appended to the feed's
  delta log as the upstream's own events (flagproxy/edge/changes.py `ChangeLog.streamed`: the feed's token
  is the one streaming, so the upstream scoped them already) and relayed with that log in the events
  file's header. The persistence backend gets the state at most once a second (`SAVE_SECONDS`).
- A worker (flagproxy/edge/scopes.py): each served scope cut from the feed is a `RelayedChanges` of its
  own, on the feed's last whole revision (a streamed feed's documents say `streamed` in their header: only
  their scopes keep a copy of the document until the first relayed change parses it; a polling edge's
  keep nothing more): a scope of the feed's projects patches the events as they
  are, a narrower one its cut of the base with the events narrowed to its projects (`narrower`); then the
  feed's log is read from the header and its new events go to the worker's open streams.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from flagproxy.edge.feeds import Feeds, Scope, events_file
from flagproxy.instance.relay import EventRelay
from flagproxy.instance.store import DeltaState

SAVE_SECONDS = 1.0  # the persistence backend gets a patched feed's state at most this often


class FeedRelay(EventRelay):
    """The leader's side for one streamed feed."""

    def __init__(self, feeds: Feeds, scope: Scope) -> None:
        super().__init__(feeds.feeds[scope], events_file(scope))
        self.feeds = feeds
        self.scope = scope
        feeds.streamed.add(scope)
        self._saving: asyncio.TimerHandle | None = None

    def extra(self, events: list[Any]) -> dict[str, Any]:
        return {"delta": self.feeds.change_log(self.scope).streamed(events)}

    def serve(self, body_parts: Any, events: list[Any], revision: int | None = None) -> None:
        super().serve(body_parts, events, revision)
        assert self._base is not None
        self.feeds.flags[self.scope] = len(self._base[0].features)
        if self.feeds.persistence is not None and self._saving is None:
            self._saving = asyncio.get_running_loop().call_later(SAVE_SECONDS, self._save)

    def _save(self) -> None:
        """The state as it is now, with the log's last id (a whole publish meanwhile saved too: harmless)."""
        self._saving = None
        if self._base is not None and self.feeds.persistence is not None:
            last = self.feeds.change_log(self.scope).last
            self.feeds.persistence.feed_changed(self.scope, self._base[0].document(), last)


def narrower(projects: tuple[str, ...]) -> Callable[[DeltaState, list[Any]], list[Any]]:
    """A change's events as a scope of `projects` sees them, given its state before them: a flag of
    another project is left out, or removed if the scope held it (it moved out); the rest as they are
    (segments are every scope's, as flagproxy/edge/scopes.py's `only_projects` keeps them)."""
    wanted = set(projects)

    def narrow(state: DeltaState, events: list[Any]) -> list[Any]:
        held: dict[Any, bool] = {}  # what the events did so far to whether the scope holds a flag
        narrowed = []
        for event in events:
            kind = event.get("type") if isinstance(event, Mapping) else None
            if kind == "feature-updated" and isinstance(event.get("feature"), Mapping):
                feature = event["feature"]
                name = feature.get("name")
                if feature.get("project", "default") in wanted:
                    held[name] = True
                    narrowed.append(event)
                elif held.get(name, name in state.features):
                    held[name] = False
                    narrowed.append({"type": "feature-removed", "featureName": name})
            else:
                if kind == "feature-removed":
                    held[event.get("featureName")] = False
                narrowed.append(event)
        return narrowed

    return narrow
