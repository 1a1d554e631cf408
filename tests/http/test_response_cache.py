"""The per-worker response cache, through a real `flagproxy proxy` process: it answers repeats, and never
with a stale answer.

Each test pins one way an answer could go stale — a new snapshot, the clock, randomness, the caller's
address, an enricher — and asks through HTTP what a client would see. A test of staleness passes trivially
if nothing is ever cached, so each also reads `flagproxy_response_cache_hits_total` from the process's
Prometheus endpoint, as an operator would, to prove the cache answered (or, where it must not, that it
never did). An answer is kept the second time its request arrives, so the third one is the first hit.
Hits are counted per process since its start: each test reads the change over its own requests, and
asks with a context of its own (`userId` the test's name) on the processes it shares with others.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.http.loopback import KEY

PROMETHEUS = "/proxy/internal-backstage/prometheus"


def flag(name: str, strategies: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": name, "enabled": True, "strategies": strategies, "variants": [], "impressionData": False}


def payload(*flags: dict[str, Any]) -> dict[str, Any]:
    return {"version": 2, "features": list(flags)}


ON = flag("on", [{"name": "default", "parameters": {}}])
OFF = {**flag("off", []), "enabled": False}
COIN = flag("coin", [{"name": "flexibleRollout", "parameters": {"rollout": "50", "stickiness": "random"}}])
# The documents the session's shared processes serve (tests/http/conftest.py proxy_serving).
PLAIN = payload(ON, OFF)
RANDOM = payload(COIN, ON)  # apart: every answer of a document with a random rollout reads randomness
FROM_2 = payload(flag("from-2", [{"name": "remoteAddress", "parameters": {"IPs": "127.0.0.2"}}]), ON)
BEHIND_A_PROXY = payload(flag("client", [{"name": "remoteAddress", "parameters": {"IPs": "203.0.113.9"}}]))


def enabled(proxy, user: str, path: str = "/proxy", source: str | None = None) -> set[str]:
    status, _, body = proxy.post(path, {"context": {"userId": user}}, key=KEY, source=source)
    assert status == 200, body
    return {t["name"] for t in json.loads(body)["toggles"] if t["enabled"]}


def hits(proxy) -> float:
    """The process's `flagproxy_response_cache_hits_total`, read with prometheus_client's parser."""
    status, _, body = proxy.get(PROMETHEUS)
    assert status == 200, body
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            if sample.name == "flagproxy_response_cache_hits_total":
                return sample.value
    raise AssertionError("no flagproxy_response_cache_hits_total in the scrape")


def wait_for(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


@pytest.fixture
def plain(proxy_serving):
    return proxy_serving(PLAIN, enable_all_endpoint=True)


def test_a_repeated_request_is_answered_from_the_cache_with_the_same_bytes(plain):
    before = hits(plain)
    context = {"context": {"userId": "repeated"}}
    first = plain.post("/proxy", context, key=KEY)
    second = plain.post("/proxy", context, key=KEY)  # kept now: a first sight is not (most never return)
    assert hits(plain) == before
    third = plain.post("/proxy", context, key=KEY)
    assert hits(plain) == before + 1
    assert first[0] == second[0] == third[0] == 200
    assert second[2] == first[2] == third[2] and second[1]["etag"] == first[1]["etag"] == third[1]["etag"]
    # The key check still runs on a cached answer.
    assert plain.post("/proxy", context, key="wrong")[0] == 401
    assert plain.post("/proxy", context)[0] == 401
    assert hits(plain) == before + 1


def test_a_cached_get_answers_a_matching_if_none_match_with_304(plain):
    before = hits(plain)
    for _ in range(3):
        status, headers, _ = plain.get("/proxy?userId=conditional", key=KEY)
        assert status == 200
    assert hits(plain) == before + 1
    status, again, body = plain.get(
        "/proxy?userId=conditional", key=KEY, headers={"If-None-Match": headers["etag"]}
    )
    assert (status, body, again["etag"]) == (304, b"", headers["etag"])
    assert "content-type" not in again and "vary" not in again
    assert hits(plain) == before + 2  # the 304 came from the cache too


def test_a_random_rollout_is_never_cached(proxy_serving):
    proxy = proxy_serving(RANDOM)
    before = hits(proxy)
    seen = set()
    for _ in range(60):
        seen.add("coin" in enabled(proxy, "random"))  # the same request every time
    assert seen == {True, False}
    assert hits(proxy) == before


def test_the_toggle_routes_share_one_cache_and_never_each_others_answers(plain):
    before = hits(plain)
    for _ in range(3):  # the third round is answered from the cache
        enabled_only = plain.get("/proxy?userId=routes", key=KEY)[2]
        every = plain.get("/proxy/all?userId=routes", key=KEY)[2]
        posted = plain.post("/proxy/all", {"context": {"userId": "routes"}}, key=KEY)[2]
        assert [t["name"] for t in json.loads(enabled_only)["toggles"]] == ["on"]
        assert [t["name"] for t in json.loads(every)["toggles"]] == ["on", "off"]
        assert json.loads(posted) == json.loads(every)
    assert hits(plain) == before + 3


def test_a_response_cache_of_0_mb_caches_nothing(proxy_serving):
    proxy = proxy_serving(PLAIN, response_cache_mb=0)
    for _ in range(4):
        assert enabled(proxy, "no-cache") == {"on"}
    assert hits(proxy) == 0


def test_an_answer_that_reads_the_callers_address_is_cached_per_address(proxy_serving):
    proxy = proxy_serving(FROM_2)
    before = hits(proxy)
    for _ in range(3):
        assert enabled(proxy, "address", source="127.0.0.2") == {"from-2", "on"}
        assert enabled(proxy, "address", source="127.0.0.3") == {"on"}
    assert hits(proxy) == before + 2  # one answer per address, each kept the second time


def test_an_address_behind_a_trusted_proxy_is_part_of_the_key(proxy_serving):
    proxy = proxy_serving(BEHIND_A_PROXY, trust_proxy=True)
    before = hits(proxy)

    def as_seen_from(address: str) -> bool:
        status, _, answer = proxy.post(
            "/proxy", {"context": {"userId": "forwarded"}}, key=KEY, headers={"X-Forwarded-For": address}
        )
        assert status == 200, answer
        return any(t["name"] == "client" for t in json.loads(answer)["toggles"])

    for _ in range(3):
        assert as_seen_from("203.0.113.9") is True
        assert as_seen_from("198.51.100.7") is False
    assert hits(proxy) == before + 2


def test_a_new_snapshot_replaces_every_cached_answer(upstream, proxy_factory):
    upstream.payload = payload(flag("first", [{"name": "default", "parameters": {}}]))
    proxy = proxy_factory(refresh_interval=50)
    assert enabled(proxy, "u1") == {"first"} == enabled(proxy, "u1") == enabled(proxy, "u1")
    assert hits(proxy) == 1
    upstream.payload = payload(flag("second", [{"name": "default", "parameters": {}}]))
    wait_for(lambda: enabled(proxy, "u1") == {"second"})


def test_an_answer_that_read_the_clock_is_not_served_after_its_date(upstream, proxy_factory):
    # A flag enabled only from a moment a few seconds ahead; the request has no currentTime, so "now"
    # decides. The moment is set once the proxy runs, and set again in the rare run where the machine was
    # so slow that it passed before the three answers below: those must come before it to prove anything.
    proxy = proxy_factory(refresh_interval=50)
    for attempt in range(3):
        switch_on = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=3)
        constraint = {"contextName": "currentTime", "operator": "DATE_AFTER", "value": switch_on.isoformat()}
        strategy = {"name": "default", "parameters": {}, "constraints": [constraint]}
        marker = flag(f"snapshot-{attempt}", [{"name": "default", "parameters": {}}])
        upstream.payload = payload(flag("timed", [strategy]), marker)
        wait_for(lambda: marker["name"] in enabled(proxy, f"waiting-{attempt}"))  # noqa: B023
        before = hits(proxy)
        answers = [enabled(proxy, f"u{attempt}") for _ in range(3)]
        if datetime.now(UTC) < switch_on:
            break
    else:
        raise AssertionError("the date passed before three answers, three times over")
    assert answers == [{marker["name"]}] * 3
    assert hits(proxy) == before + 1  # cached, up to the second before switch_on
    wait_for(lambda: enabled(proxy, f"u{attempt}") == {"timed", marker["name"]})
    assert datetime.now(UTC) > switch_on


def test_named_toggles_are_counted_for_usage_metrics_on_every_cached_answer(upstream, proxy_factory):
    upstream.payload = payload(flag("on", [{"name": "default", "parameters": {}}]))
    proxy = proxy_factory(metrics_interval=100)

    def ask(times: int) -> None:
        for _ in range(times):
            status, _, _ = proxy.post("/proxy", {"toggles": ["on"], "context": {"userId": "u1"}}, key=KEY)
            assert status == 200

    def counted() -> int:
        posted = upstream.received("/api/client/metrics")
        return sum(m["body"]["bucket"]["toggles"]["on"]["yes"] for m in posted)

    ask(3)
    assert hits(proxy) == 1
    wait_for(lambda: counted() == 3)
    ask(2)  # both from the cache
    assert hits(proxy) == 3
    wait_for(lambda: counted() == 5)


def test_with_custom_enrichers_nothing_is_cached(upstream, proxy_factory, tmp_path):
    # An enricher that is not a function of the context alone: the same request gets another answer.
    enrichers = tmp_path / "enrichers.py"
    enrichers.write_text(
        "import itertools\n"
        "turns = itertools.count()\n"
        "def alternate(context):\n"
        "    context.setdefault('properties', {})['turn'] = str(next(turns) % 2)\n"
        "    return context\n"
        "enrichers = [alternate]\n"
    )
    turn = {"contextName": "turn", "operator": "IN", "values": ["1"]}
    upstream.payload = payload(flag("odd", [{"name": "default", "parameters": {}, "constraints": [turn]}]))
    proxy = proxy_factory(exp_custom_enrichers=str(enrichers))
    answers = [enabled(proxy, "u1") for _ in range(4)]
    assert answers == [set(), {"odd"}, set(), {"odd"}]
    assert hits(proxy) == 0


def described(name: str, description: str, enabled: bool = True) -> dict[str, Any]:
    return {
        **flag(name, [{"name": "default", "parameters": {}}]),
        "enabled": enabled,
        "description": description,
    }


def test_an_edit_no_answer_reads_keeps_the_cached_answers_and_their_etag(upstream, proxy_factory):
    """A description edit is a new revision (the server-side SDKs' document carries descriptions) but
    answers the same: the cache goes on answering and the ETag stays; a real change still shows."""
    upstream.payload = payload(described("first", "before"), described("second", "off", enabled=False))
    proxy = proxy_factory(refresh_interval=50)

    def answer() -> tuple[str, set[str]]:
        status, headers, body = proxy.post("/proxy", {"context": {"userId": "edit"}}, key=KEY)
        assert status == 200, body
        return headers["etag"], {t["name"] for t in json.loads(body)["toggles"] if t["enabled"]}

    def revision() -> int:
        return json.loads(proxy.get("/proxy/status.json", key=KEY)[2])["revision"]

    etag, names = answer()
    assert answer() == answer() == (etag, {"first"})
    before, first_revision = hits(proxy), revision()
    assert before >= 1
    upstream.payload = payload(described("first", "after"), described("second", "edited too", enabled=False))
    wait_for(lambda: revision() > first_revision)
    assert answer() == (etag, {"first"})
    assert hits(proxy) == before + 1  # the first request after the edit is a hit: the cache was kept
    edited_revision = revision()
    upstream.payload = payload(described("first", "after"), described("second", "edited too"))
    wait_for(lambda: revision() > edited_revision)
    new_etag, names = answer()
    assert names == {"first", "second"} and new_etag != etag
    assert hits(proxy) == before + 1  # a new answer, computed: not from the cache


def test_the_cache_holds_at_most_response_cache_mb_and_lets_the_oldest_go(plain, proxy_serving):
    """RESPONSE_CACHE_MB bounds bodies and keys (docs/proxy.md): 40 requests of 60 kB each (their keys, the
    raw bodies, are 2.4 MB; the answers are one body) fit in 32 MiB but not in 1 MiB, where the oldest goes
    first and the newest stays."""
    small = proxy_serving(PLAIN, enable_all_endpoint=True, response_cache_mb=1)
    bodies = [
        {"context": {"userId": "bounded", "properties": {"pad": f"{n:03d}" + "x" * 60_000}}}
        for n in range(40)
    ]

    def hit_when_asked_again(proxy, body) -> bool:
        before = hits(proxy)
        status, _, answer = proxy.post("/proxy", body, key=KEY)
        assert status == 200, answer
        return hits(proxy) == before + 1

    for proxy in (plain, small):
        for body in bodies:
            for _ in range(2):  # kept the second time
                assert proxy.post("/proxy", body, key=KEY)[0] == 200
    assert hit_when_asked_again(plain, bodies[0]) and hit_when_asked_again(plain, bodies[-1])
    assert hit_when_asked_again(small, bodies[-1])
    assert not hit_when_asked_again(small, bodies[0])  # gone: 2.4 MB of keys do not fit in 1 MiB
