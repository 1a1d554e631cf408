"""Compiled snapshots for the server's frontend API: one per client payload (token scope and revision).

The frontend API evaluates with the same engine as `flagproxy proxy` and `flagproxy edge`
(flagproxy/snapshot.py): the payload a client token of the same scope would read is compiled once per
data revision and kept, a bounded few per worker, so a request costs one evaluation.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from flagproxy.server.client_features import ClientPayload, ClientQuery
from flagproxy.snapshot import compile_snapshot


class FrontendSnapshots:
    def __init__(self, max_entries: int = 32) -> None:
        self.max_entries = max_entries
        self._snapshots: OrderedDict[ClientQuery, tuple[int, Any]] = OrderedDict()

    def get(self, query: ClientQuery, payload: ClientPayload) -> Any:
        kept = self._snapshots.get(query)
        if kept is not None and kept[0] == payload.revision:
            self._snapshots.move_to_end(query)
            return kept[1]
        snapshot = compile_snapshot(payload.body)
        self._snapshots[query] = (payload.revision, snapshot)
        self._snapshots.move_to_end(query)
        while len(self._snapshots) > self.max_entries:
            self._snapshots.popitem(last=False)
        return snapshot
