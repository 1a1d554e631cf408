"""A bounded per-worker cache of finished toggle answers (DESIGN.md performance plan, point 4).

Browser and mobile SDKs poll with the same context again and again, so most requests repeat one seen a
moment ago. The key is the route plus the raw request input exactly as it arrived — the query string of a
GET, the body of a POST — plus the caller's address when the snapshot reads `remoteAddress`; the value is
the finished body, its ETag and the per-toggle outcomes that usage metrics count. Everything else that goes
into the context is fixed per app (forced environment, app name), so equal keys give equal answers.

An answer is stored only as long as the engine says it stays true (`valid_in`, flagproxy/snapshot.py):
for the whole snapshot, or up to the wall-clock second the clock bounds it by (a missing currentTime: until
a scheduled date passes, or within the second its text was read), never when it used randomness or a
custom strategy. A snapshot whose answers differ (a new engine: `ServedSnapshot.answers`) empties the
cache; one that changed only what no toggle answer reads (a description) keeps it. One cache serves all
the toggle routes of a worker, so its bound (RESPONSE_CACHE_MB, in bytes of bodies and keys) is the
worker's; when it is reached the oldest entries go first (a dict keeps insertion order, so that costs
nothing on a hit, unlike an LRU's reordering).

An answer is kept only the second time its key is asked for (a doorkeeper, as in TinyLFU): a stream of
one-off contexts would otherwise fill the cache with answers nobody asks for again, costing memory and,
for large snapshots, the time of writing each body into cold memory (at 5000 flags that was about 15% of
the throughput of unique requests). The doorkeeper remembers a key as three bits of a fixed 512 KiB bitmap
(a Bloom filter: three slices of the key's hash), so remembering costs no allocation; it starts over after
65,536 keys (a million unique keys in a row: 51 looked seen, 1 in 20,000).
With one bit a key in a 128 KiB bitmap that was 6% (3% on average): a stream of unique contexts then put
one answer in 30 into the cache, which filled its bound with answers nobody asked for again (at 350 flags,
under 18 s of unique requests a worker's RSS went from 57 to 78 MiB; with three bits it stays at 57).

Equal bodies are kept once: many keys share an answer (the same context sent as a GET query and as a POST
body, users whose context differs only in what no flag reads), and at 5000 flags one body is some 250 kB.
The bound counts each distinct body once. Finding the stored twin hashes the new body once (on a put, which
happens at most once per key and snapshot); a hit costs nothing more.
"""

from __future__ import annotations

import time
from typing import Any

from flagproxy.instance.store import CACHE_NEVER, CACHE_SNAPSHOT

DEFAULT_MAX_BYTES = 32 * 1024 * 1024  # the RESPONSE_CACHE_MB option's default
_SEEN_BITS = 1 << 22  # the doorkeeper's bitmap: 512 KiB, three bits a key
_SEEN_LIMIT = 1 << 16  # keys remembered before it starts over
_SEEN_MASK = _SEEN_BITS - 1
_ENTRY_OVERHEAD = 200  # the tuple, the dict slot and the ETag, roughly


class CachedAnswer:
    __slots__ = ("body", "etag", "outcomes", "size", "valid_in")

    def __init__(self, body: bytes, etag: str, outcomes: Any, valid_in: int, size: int) -> None:
        self.body = body
        self.etag = etag
        self.outcomes = outcomes  # what usage metrics count for a `toggles` request, else None
        self.valid_in = valid_in
        self.size = size  # of its key and overhead; the body counts once per distinct body (_bodies)


class ResponseCache:
    """Answers of one worker; `get` and `put` take what they are valid for (`ServedSnapshot.answers`). A
    key is a tuple whose str and bytes members are the request's input (their lengths count towards the
    bound)."""

    __slots__ = ("_bodies", "_bytes", "_entries", "_seen", "_seen_count", "_snapshot", "hits", "max_bytes")

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: dict[Any, CachedAnswer] = {}
        self._bodies: dict[bytes, list[Any]] = {}  # body -> [the stored body, how many entries share it]
        self._snapshot: Any = None
        self._bytes = 0
        self._seen = bytearray(_SEEN_BITS // 8)
        self._seen_count = 0
        self.hits = 0  # answers sent from here, counted by the route that sends them (a refused key is none)

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, snapshot: Any, key: Any) -> CachedAnswer | None:
        if snapshot is not self._snapshot:
            return None
        answer = self._entries.get(key)
        if answer is None or answer.valid_in == CACHE_SNAPSHOT:
            return answer
        if int(time.time()) <= answer.valid_in:
            return answer
        self._drop(key)  # its last second has passed
        return None

    def put(self, snapshot: Any, key: Any, body: bytes, etag: str, outcomes: Any, valid_in: int) -> None:
        if valid_in == CACHE_NEVER or self._first_sight(key):
            return
        if snapshot is not self._snapshot:
            self._entries.clear()
            self._bodies.clear()
            self._bytes = 0
            self._snapshot = snapshot
        size = sum(len(part) for part in key if isinstance(part, bytes | str)) + _ENTRY_OVERHEAD
        if size + len(body) > self.max_bytes:
            return
        self._drop(key)
        entries = self._entries
        shared = self._bodies.get(body)
        added = size if shared is not None else size + len(body)
        while entries and self._bytes + added > self.max_bytes:
            self._drop(next(iter(entries)))
            if shared is not None and shared[1] == 0:  # its twin was just evicted
                shared = None
                added = size + len(body)
        if shared is None:
            shared = self._bodies[body] = [body, 0]
        shared[1] += 1
        entries[key] = CachedAnswer(shared[0], etag, outcomes, valid_in, size)
        self._bytes += added

    def _first_sight(self, key: Any) -> bool:
        """Remembers the key; True when it was not seen before (since the doorkeeper last started over)."""
        h = hash(key)
        a, b, c = h & _SEEN_MASK, (h >> 22) & _SEEN_MASK, (h >> 44) & _SEEN_MASK  # 64-bit hash: 3 x 22 bits
        seen = self._seen
        if seen[a >> 3] >> (a & 7) & seen[b >> 3] >> (b & 7) & seen[c >> 3] >> (c & 7) & 1:
            return False
        if self._seen_count >= _SEEN_LIMIT:
            seen[:] = bytes(len(seen))
            self._seen_count = 0
        seen[a >> 3] |= 1 << (a & 7)
        seen[b >> 3] |= 1 << (b & 7)
        seen[c >> 3] |= 1 << (c & 7)
        self._seen_count += 1
        return True

    def _drop(self, key: Any) -> None:
        answer = self._entries.pop(key, None)
        if answer is None:
            return
        self._bytes -= answer.size
        shared = self._bodies[answer.body]
        shared[1] -= 1
        if shared[1] == 0:
            del self._bodies[answer.body]
            self._bytes -= len(answer.body)
