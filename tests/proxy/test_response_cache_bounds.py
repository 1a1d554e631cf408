"""ResponseCache's own rules: doorkeeper, byte bound, oldest-first eviction, snapshot and clock validity."""

from __future__ import annotations

import time

from flagproxy.instance.response_cache import _SEEN_LIMIT, CACHE_NEVER, CACHE_SNAPSHOT, ResponseCache

SNAPSHOT, NEXT_SNAPSHOT = object(), object()


def key(raw: bytes) -> tuple[str, bytes]:
    return ("r", raw)  # the route's name (one byte here) and the request's raw input


def put(cache: ResponseCache, raw: bytes, body: bytes | None = None, valid_in: int = CACHE_SNAPSHOT) -> None:
    """Stores an answer the way a repeated request does: a key's first sight is not kept. By default each
    key has a body of its own (100 bytes)."""
    if body is None:
        body = raw.ljust(100, b"x")
    for _ in range(2):
        cache.put(SNAPSHOT, key(raw), body, 'W/"etag"', None, valid_in)


def test_an_answer_is_kept_the_second_time_its_key_is_asked_for() -> None:
    cache = ResponseCache()
    for i in range(1000):  # one-off requests leave nothing behind
        cache.put(SNAPSHOT, key(b"once-%d" % i), b"x" * 100, 'W/"e"', None, CACHE_SNAPSHOT)
    assert len(cache) <= 2  # only keys whose three doorkeeper bits other keys set (about 1 in 10^8 here)
    kept_before = len(cache)
    cache.put(SNAPSHOT, key(b"once-7"), b"x" * 100, 'W/"e"', None, CACHE_SNAPSHOT)
    assert cache.get(SNAPSHOT, key(b"once-7")) is not None and len(cache) - kept_before <= 1


def test_one_off_keys_are_rarely_kept_however_many_arrive() -> None:
    cache = ResponseCache()
    arrivals = 4 * _SEEN_LIMIT  # the doorkeeper starts over three times
    for i in range(arrivals):
        cache.put(SNAPSHOT, key(b"one-off-%d" % i), b"x", 'W/"e"', None, CACHE_SNAPSHOT)
    # A key whose three bits other keys set looks seen: about 1 in 40,000 on average between two fresh
    # starts (one bit a key let 3% through, and a stream of unique contexts filled the cache's bound).
    assert len(cache) < 0.0005 * arrivals
    assert len(cache._seen) == 512 * 1024  # the doorkeeper's memory does not grow


def test_the_byte_bound_evicts_the_oldest_answers_first() -> None:
    cache = ResponseCache(max_bytes=1000)  # each entry: 100-byte body + 3-byte key + 200 overhead
    for i in range(5):
        put(cache, b"k%d" % i)
    assert len(cache) == 3
    assert cache.get(SNAPSHOT, key(b"k0")) is None and cache.get(SNAPSHOT, key(b"k1")) is None
    assert all(cache.get(SNAPSHOT, key(b"k%d" % i)) is not None for i in (2, 3, 4))


def test_equal_bodies_are_kept_once_and_counted_once() -> None:
    cache = ResponseCache(max_bytes=1000)  # one 500-byte body, then 204 bytes per key
    shared = b"s" * 500
    put(cache, b"get", body=shared)
    put(cache, b"pst", body=bytes(shared))  # an equal body built anew, as every evaluation builds one
    assert len(cache) == 2
    first, second = cache.get(SNAPSHOT, key(b"get")), cache.get(SNAPSHOT, key(b"pst"))
    assert first is not None and second is not None and first.body is second.body
    put(cache, b"k3", body=bytes(shared))  # 500 + 3 * 204 > 1000: the oldest key goes, the body stays
    assert len(cache) == 2 and cache.get(SNAPSHOT, key(b"get")) is None
    for i in range(4):  # other bodies (302 bytes each) push out both sharers, and the shared body goes too
        put(cache, b"o%d" % i)
    assert len(cache) == 3 and cache._bodies.keys() == {(b"o%d" % i).ljust(100, b"x") for i in (1, 2, 3)}
    assert cache._bytes == 3 * (100 + 3 + 200)  # body, key ("r" and "oN"), overhead


def test_an_answer_larger_than_the_bound_is_not_kept() -> None:
    cache = ResponseCache(max_bytes=1000)
    put(cache, b"small")
    put(cache, b"huge", body=b"x" * 2000)
    assert cache.get(SNAPSHOT, key(b"huge")) is None
    assert cache.get(SNAPSHOT, key(b"small")) is not None


def test_storing_a_key_again_replaces_it_without_leaking_bytes() -> None:
    cache = ResponseCache(max_bytes=1000)
    for _ in range(50):
        put(cache, b"same")
    for i in range(3):
        put(cache, b"o%d" % i)
    assert len(cache) == 3  # "same" was counted once, so only it had to go


def test_answers_belong_to_one_snapshot() -> None:
    cache = ResponseCache()
    put(cache, b"k")
    assert cache.get(NEXT_SNAPSHOT, key(b"k")) is None
    for _ in range(2):
        cache.put(NEXT_SNAPSHOT, key(b"other"), b"body", 'W/"e"', None, CACHE_SNAPSHOT)
    assert len(cache) == 1 and cache.get(SNAPSHOT, key(b"k")) is None


def test_never_and_clock_bounded_validity() -> None:
    cache = ResponseCache()
    put(cache, b"random", valid_in=CACHE_NEVER)
    assert cache.get(SNAPSHOT, key(b"random")) is None and len(cache) == 0
    put(cache, b"later", valid_in=int(time.time()) + 60)
    put(cache, b"past", valid_in=int(time.time()) - 1)
    assert cache.get(SNAPSHOT, key(b"later")) is not None  # holds up to its last second
    assert cache.get(SNAPSHOT, key(b"past")) is None
    assert len(cache) == 1  # the stale answer is dropped when found


def test_the_whole_key_counts_towards_the_bound() -> None:
    cache = ResponseCache(max_bytes=1000)
    for raw in (b"q" * 300, b"p" * 300):
        for _ in range(2):
            cache.put(SNAPSHOT, ("r", raw, "127.0.0.1"), b"x" * 100, 'W/"e"', None, CACHE_SNAPSHOT)
    assert len(cache) == 1  # 2 x (100 + 1 + 300 + 9 + 200) > 1000
