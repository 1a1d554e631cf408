"""The per-worker response cache, through a real proxy: it answers repeats, and never with a stale answer.

Each test pins one way an answer could go stale — a new snapshot, the clock, randomness, the caller's
address, an enricher — and asks through HTTP what a client would see. `caches()` looks inside the app only
to prove the cache was in play (a test of staleness passes trivially if nothing is ever cached), so these
tests serve the app inside the test process (app_factory): the cache has no outside view yet.
"""

from __future__ import annotations

import itertools
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.http.loopback import KEY


def flag(name: str, strategies: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": name, "enabled": True, "strategies": strategies, "variants": [], "impressionData": False}


def payload(*flags: dict[str, Any]) -> dict[str, Any]:
    return {"version": 2, "features": list(flags)}


def enabled(proxy, path: str = "/proxy", source: str | None = None) -> set[str]:
    status, _, body = proxy.post(path, {"context": {"userId": "u1"}}, key=KEY, source=source)
    assert status == 200, body
    return {t["name"] for t in json.loads(body)["toggles"] if t["enabled"]}


def cached_entries(proxy) -> int:
    cache = proxy.app.ctx.proxy.response_cache
    return 0 if cache is None else len(cache)


def wait_for(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_a_repeated_request_is_answered_from_the_cache_with_the_same_bytes(upstream, app_factory):
    upstream.payload = payload(flag("on", [{"name": "default", "parameters": {}}]))
    proxy = app_factory()
    first = proxy.post("/proxy", {"context": {"userId": "u1"}}, key=KEY)
    assert cached_entries(proxy) == 0  # a first sight is not kept: most contexts are never asked again
    second = proxy.post("/proxy", {"context": {"userId": "u1"}}, key=KEY)
    assert cached_entries(proxy) == 1
    third = proxy.post("/proxy", {"context": {"userId": "u1"}}, key=KEY)
    assert second[2] == first[2] == third[2] and second[1]["etag"] == first[1]["etag"] == third[1]["etag"]
    assert cached_entries(proxy) == 1
    # The key check still runs on a cached answer.
    assert proxy.post("/proxy", {"context": {"userId": "u1"}}, key="wrong")[0] == 401
    assert proxy.post("/proxy", {"context": {"userId": "u1"}})[0] == 401


def test_a_cached_get_answers_a_matching_if_none_match_with_304(upstream, app_factory):
    upstream.payload = payload(flag("on", [{"name": "default", "parameters": {}}]))
    proxy = app_factory()
    for _ in range(2):
        status, headers, _ = proxy.get("/proxy?userId=u1", key=KEY)
    assert status == 200 and cached_entries(proxy) == 1
    status, again, body = proxy.get("/proxy?userId=u1", key=KEY, headers={"If-None-Match": headers["etag"]})
    assert (status, body, again["etag"]) == (304, b"", headers["etag"])
    assert "content-type" not in again and "vary" not in again


def test_a_new_snapshot_replaces_every_cached_answer(upstream, app_factory):
    upstream.payload = payload(flag("first", [{"name": "default", "parameters": {}}]))
    proxy = app_factory(refresh_interval=50)
    assert enabled(proxy) == {"first"} == enabled(proxy)
    assert cached_entries(proxy) == 1
    upstream.payload = payload(flag("second", [{"name": "default", "parameters": {}}]))
    wait_for(lambda: enabled(proxy) == {"second"})


def test_an_answer_that_read_the_clock_is_not_served_after_its_date(upstream, app_factory):
    # Enabled only from a moment two seconds ahead; the request has no currentTime, so "now" decides.
    switch_on = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
    constraint = {"contextName": "currentTime", "operator": "DATE_AFTER", "value": switch_on.isoformat()}
    strategy = {"name": "default", "parameters": {}, "constraints": [constraint]}
    upstream.payload = payload(flag("timed", [strategy]))
    proxy = app_factory()
    assert enabled(proxy) == set()
    assert enabled(proxy) == set()
    assert cached_entries(proxy) == 1  # cached, up to the second before switch_on
    wait_for(lambda: enabled(proxy) == {"timed"})
    assert datetime.now(UTC) > switch_on


def test_a_random_rollout_is_never_cached(upstream, app_factory):
    parameters = {"rollout": "50", "stickiness": "random", "groupId": "g"}
    rollout = {"name": "flexibleRollout", "parameters": parameters}
    upstream.payload = payload(flag("coin", [rollout]))
    proxy = app_factory()
    seen = set()
    for _ in range(60):
        seen.add("coin" in enabled(proxy))
    assert seen == {True, False}
    assert cached_entries(proxy) == 0


def test_an_answer_that_reads_the_callers_address_is_cached_per_address(upstream, app_factory):
    only_2 = {"name": "remoteAddress", "parameters": {"IPs": "127.0.0.2"}}
    upstream.payload = payload(flag("from-2", [only_2]), flag("on", [{"name": "default", "parameters": {}}]))
    proxy = app_factory()
    for _ in range(3):
        assert enabled(proxy, source="127.0.0.2") == {"from-2", "on"}
        assert enabled(proxy, source="127.0.0.3") == {"on"}
    assert cached_entries(proxy) == 2


def test_an_address_behind_a_trusted_proxy_is_part_of_the_key(upstream, app_factory):
    only_client = {"name": "remoteAddress", "parameters": {"IPs": "203.0.113.9"}}
    upstream.payload = payload(flag("client", [only_client]))
    proxy = app_factory(trust_proxy=True)
    body = {"context": {"userId": "u1"}}

    def as_seen_from(address: str) -> bool:
        _, _, answer = proxy.post("/proxy", body, key=KEY, headers={"X-Forwarded-For": address})
        return any(t["name"] == "client" for t in json.loads(answer)["toggles"])

    assert as_seen_from("203.0.113.9") is True
    assert as_seen_from("198.51.100.7") is False
    assert as_seen_from("203.0.113.9") is True


def test_named_toggles_are_counted_for_usage_metrics_on_every_cached_answer(upstream, app_factory):
    upstream.payload = payload(flag("on", [{"name": "default", "parameters": {}}]))
    proxy = app_factory(metrics_interval=100)

    def ask(times: int) -> None:
        for _ in range(times):
            status, _, _ = proxy.post("/proxy", {"toggles": ["on"], "context": {"userId": "u1"}}, key=KEY)
            assert status == 200

    def counted() -> list[int]:
        return [m["body"]["bucket"]["toggles"]["on"]["yes"] for m in upstream.received("/api/client/metrics")]

    ask(3)
    assert cached_entries(proxy) == 1
    wait_for(lambda: counted() == [3])
    ask(2)  # after a flush: the counts go into the new bucket
    wait_for(lambda: counted() == [3, 2])


def test_with_custom_enrichers_nothing_is_cached(upstream, app_factory):
    turns = itertools.count()

    def alternate(context: dict[str, Any]) -> dict[str, Any]:  # not a function of the context alone
        context.setdefault("properties", {})["turn"] = str(next(turns) % 2)
        return context

    turn = {"contextName": "turn", "operator": "IN", "values": ["1"]}
    upstream.payload = payload(flag("odd", [{"name": "default", "parameters": {}, "constraints": [turn]}]))
    proxy = app_factory(exp_custom_enrichers=[alternate])
    answers = [enabled(proxy) for _ in range(4)]
    assert answers == [set(), {"odd"}, set(), {"odd"}]
    assert cached_entries(proxy) == 0


def test_the_toggle_routes_share_one_cache_and_never_each_others_answers(upstream, app_factory):
    upstream.payload = payload(
        flag("on", [{"name": "default", "parameters": {}}]), {**flag("off", []), "enabled": False}
    )
    proxy = app_factory(enable_all_endpoint=True)
    for _ in range(2):  # the second round is answered from the cache
        enabled_only = proxy.get("/proxy?userId=u1", key=KEY)[2]
        every = proxy.get("/proxy/all?userId=u1", key=KEY)[2]
        posted = proxy.post("/proxy/all", {"context": {"userId": "u1"}}, key=KEY)[2]
        assert [t["name"] for t in json.loads(enabled_only)["toggles"]] == ["on"]
        assert [t["name"] for t in json.loads(every)["toggles"]] == ["on", "off"]
        assert json.loads(posted) == json.loads(every)
    assert cached_entries(proxy) == 3


def test_a_response_cache_of_0_mb_caches_nothing(upstream, app_factory):
    upstream.payload = payload(flag("on", [{"name": "default", "parameters": {}}]))
    proxy = app_factory(response_cache_mb=0)
    assert enabled(proxy) == {"on"}
    assert enabled(proxy) == {"on"}
    assert cached_entries(proxy) == 0
