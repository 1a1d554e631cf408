"""A bounded per-worker cache of finished toggle answers (DESIGN.md performance plan, point 4).

Browser and mobile SDKs poll with the same context again and again, so most requests repeat one seen a
moment ago. The key is the route plus the raw request input exactly as it arrived — the query string of a
GET, the body of a POST — plus the caller's address when the snapshot reads `remoteAddress`; the value is
the finished body, its ETag and the per-toggle outcomes that usage metrics count. Everything else that goes
into the context is fixed per app (forced environment, app name), so equal keys give equal answers.

An answer is stored only as long as the engine says it stays true (`valid_in`, flagproxy/snapshot.py):
for the whole snapshot, or only within the wall-clock second it read (a missing currentTime), never when it
used randomness or a custom strategy. A new snapshot empties the cache. One cache serves all the toggle
routes of a worker, so its bound (RESPONSE_CACHE_MB, in bytes of bodies and keys) is the worker's; when it
is reached the oldest entries go first (a dict keeps insertion order, so that costs nothing on a hit,
unlike an LRU's reordering).
"""

from __future__ import annotations

import time
from typing import Any

from flagproxy.proxy.store import CACHE_NEVER, CACHE_SNAPSHOT

DEFAULT_MAX_BYTES = 32 * 1024 * 1024  # the RESPONSE_CACHE_MB option's default
_ENTRY_OVERHEAD = 200  # the tuple, the dict slot and the ETag, roughly


class CachedAnswer:
    __slots__ = ("body", "etag", "outcomes", "size", "valid_in")

    def __init__(self, body: bytes, etag: str, outcomes: Any, valid_in: int, size: int) -> None:
        self.body = body
        self.etag = etag
        self.outcomes = outcomes  # what usage metrics count for a `toggles` request, else None
        self.valid_in = valid_in
        self.size = size


class ResponseCache:
    """Answers of one worker; `get` and `put` take the snapshot they are for. A key is a tuple whose
    str and bytes members are the request's input (their lengths count towards the bound)."""

    __slots__ = ("_bytes", "_entries", "_snapshot", "max_bytes")

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: dict[Any, CachedAnswer] = {}
        self._snapshot: Any = None
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, snapshot: Any, key: Any) -> CachedAnswer | None:
        if snapshot is not self._snapshot:
            return None
        answer = self._entries.get(key)
        if answer is None or answer.valid_in == CACHE_SNAPSHOT:
            return answer
        if answer.valid_in == int(time.time()):
            return answer
        self._drop(key)  # its second has passed
        return None

    def put(self, snapshot: Any, key: Any, body: bytes, etag: str, outcomes: Any, valid_in: int) -> None:
        if valid_in == CACHE_NEVER:
            return
        if snapshot is not self._snapshot:
            self._entries.clear()
            self._bytes = 0
            self._snapshot = snapshot
        size = len(body) + sum(len(part) for part in key if isinstance(part, bytes | str)) + _ENTRY_OVERHEAD
        if size > self.max_bytes:
            return
        self._drop(key)
        entries = self._entries
        while self._bytes + size > self.max_bytes:
            self._drop(next(iter(entries)))
        entries[key] = CachedAnswer(body, etag, outcomes, valid_in, size)
        self._bytes += size

    def _drop(self, key: Any) -> None:
        answer = self._entries.pop(key, None)
        if answer is not None:
            self._bytes -= answer.size
