"""ResponseCache's own rules: its byte bound, oldest-first eviction, snapshot and clock validity."""

from __future__ import annotations

import time

from flagproxy.proxy.response_cache import CACHE_NEVER, CACHE_SNAPSHOT, ResponseCache

SNAPSHOT, NEXT_SNAPSHOT = object(), object()


def key(raw: bytes) -> tuple[str, bytes]:
    return ("r", raw)  # the route's name (one byte here) and the request's raw input


def put(cache: ResponseCache, raw: bytes, body: bytes = b"x" * 100, valid_in: int = CACHE_SNAPSHOT) -> None:
    cache.put(SNAPSHOT, key(raw), body, 'W/"etag"', None, valid_in)


def test_the_byte_bound_evicts_the_oldest_answers_first() -> None:
    cache = ResponseCache(max_bytes=1000)  # each entry: 100-byte body + 3-byte key + 200 overhead
    for i in range(5):
        put(cache, b"k%d" % i)
    assert len(cache) == 3
    assert cache.get(SNAPSHOT, key(b"k0")) is None and cache.get(SNAPSHOT, key(b"k1")) is None
    assert all(cache.get(SNAPSHOT, key(b"k%d" % i)) is not None for i in (2, 3, 4))


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
    cache.put(NEXT_SNAPSHOT, key(b"other"), b"body", 'W/"e"', None, CACHE_SNAPSHOT)
    assert len(cache) == 1 and cache.get(SNAPSHOT, key(b"k")) is None


def test_never_and_per_second_validity() -> None:
    cache = ResponseCache()
    put(cache, b"random", valid_in=CACHE_NEVER)
    assert cache.get(SNAPSHOT, key(b"random")) is None and len(cache) == 0
    put(cache, b"now", valid_in=int(time.time()))
    put(cache, b"past", valid_in=int(time.time()) - 1)
    assert cache.get(SNAPSHOT, key(b"past")) is None
    assert len(cache) <= 1  # the stale answer is dropped when found


def test_the_whole_key_counts_towards_the_bound() -> None:
    cache = ResponseCache(max_bytes=1000)
    cache.put(SNAPSHOT, ("r", b"q" * 300, "127.0.0.1"), b"x" * 100, 'W/"e"', None, CACHE_SNAPSHOT)
    cache.put(SNAPSHOT, ("r", b"p" * 300, "127.0.0.1"), b"x" * 100, 'W/"e"', None, CACHE_SNAPSHOT)
    assert len(cache) == 1  # 2 x (100 + 1 + 300 + 9 + 200) > 1000
