"""`flagproxy proxy --streaming` against a stub upstream that streams (tests/http/stream_stub.py): the
faults, fall-backs and resumptions a real server is not made to show. A real proxy process each; the
polling interval is long (60 s) where the test says nothing came by polling, short where it must poll."""

from __future__ import annotations

import glob
import json
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.http.loopback import KEY, SAMPLE, LoopThread
from tests.http.processes import (
    Process,
    ProxyUnderTest,
    ask_worker,
    listening_workers,
    wait_until_listening,
)
from tests.http.stream_stub import StreamingStub, eventually, sse

STREAMING = "/api/client/streaming"
FEATURES = "/api/client/features"


@pytest.fixture
def upstream(loop_thread: LoopThread) -> Iterator[StreamingStub]:
    stub = StreamingStub(loop_thread, json.loads(json.dumps(SAMPLE)))
    yield stub
    stub.end_streams()
    stub.stop()


def flag(name: str, enabled: bool = True) -> dict[str, Any]:
    return {"name": name, "enabled": enabled, "strategies": [{"name": "default", "parameters": {}}]}


def names(proxy: ProxyUnderTest) -> set[str]:
    return {toggle["name"] for toggle in proxy.toggles()}


def test_streams_instead_of_polling_and_applies_each_event(
    upstream: StreamingStub, proxy_factory: Callable[..., ProxyUnderTest]
) -> None:
    upstream.payload = {"version": 2, "features": [flag("a"), flag("b")], "segments": []}
    proxy = proxy_factory(streaming=True, refresh_interval=60_000)
    assert names(proxy) == {"a", "b"}
    upstream.push(sse("unleash-updated", {"events": [{"eventId": 2, "type": "feature-updated",
                                                     "feature": flag("c")}]}, 2))  # fmt: skip
    eventually(lambda: names(proxy) == {"a", "b", "c"}, "the added flag")
    upstream.push(sse("unleash-updated", {"events": [
        {"eventId": 3, "type": "feature-removed", "featureName": "a", "project": "default"},
        {"eventId": 4, "type": "feature-updated", "feature": flag("b", enabled=False)},
    ]}, 4))  # fmt: skip
    eventually(lambda: names(proxy) == {"c"}, "the removed and the switched-off flag")
    assert upstream.received(FEATURES) == []  # not one poll
    request = upstream.received(STREAMING)[0]
    assert request["headers"]["Accept"] == "text/event-stream"
    assert request["headers"]["Authorization"] == "stub-server-token"


def test_an_event_that_changes_nothing_keeps_the_revision_and_etag(
    upstream: StreamingStub, proxy_factory: Callable[..., ProxyUnderTest]
) -> None:
    upstream.payload = {"version": 2, "features": [flag("a")], "segments": []}
    proxy = proxy_factory(streaming=True, refresh_interval=60_000)
    status, headers, _ = proxy.get("/proxy", key=KEY)
    etag = headers["etag"]
    revision = json.loads(proxy.get("/proxy/status.json", key=KEY)[2])["revision"]
    # The same feature again, then one that changes: only the second moves the revision.
    upstream.push(sse("unleash-updated", {"events": [{"eventId": 2, "type": "feature-updated",
                                                     "feature": flag("a")}]}, 2))  # fmt: skip
    upstream.push(sse("unleash-updated", {"events": [{"eventId": 3, "type": "feature-updated",
                                                     "feature": flag("z", enabled=False)}]}, 3))  # fmt: skip
    eventually(
        lambda: json.loads(proxy.get("/proxy/status.json", key=KEY)[2])["revision"] > revision, "a revision"
    )
    assert json.loads(proxy.get("/proxy/status.json", key=KEY)[2])["revision"] == revision + 1
    # z is off: the answer is the same body, so the same ETag, and 304 for it.
    status, headers, _ = proxy.get("/proxy", key=KEY, headers={"If-None-Match": etag})
    assert (status, headers["etag"]) == (304, etag)


def test_reconnects_with_last_event_id_and_misses_nothing(
    upstream: StreamingStub, proxy_factory: Callable[..., ProxyUnderTest]
) -> None:
    upstream.payload = {"version": 2, "features": [flag("a")], "segments": []}
    upstream.event_id = 7
    proxy = proxy_factory(streaming=True, refresh_interval=60_000)
    upstream.push(sse("unleash-updated", {"events": [{"eventId": 8, "type": "feature-updated",
                                                     "feature": flag("b")}]}, 8))  # fmt: skip
    eventually(lambda: names(proxy) == {"a", "b"}, "b")
    # The stream ends; what comes next is what was missed after event 8, not a hydration.
    upstream.connected = sse("unleash-connected", {"events": [{"eventId": 9, "type": "feature-updated",
                                                              "feature": flag("c")}]}, 9)  # fmt: skip
    upstream.end_streams()
    second = eventually(lambda: upstream.received(STREAMING)[1:], "a second connection")[0]
    assert second["headers"]["Last-Event-ID"] == "8"
    eventually(lambda: names(proxy) == {"a", "b", "c"}, "c, sent after the reconnect")
    assert upstream.received(FEATURES) == []


def test_an_event_it_cannot_read_makes_it_hydrate_again(
    upstream: StreamingStub, proxy_factory: Callable[..., ProxyUnderTest]
) -> None:
    upstream.payload = {"version": 2, "features": [flag("a")], "segments": []}
    proxy = proxy_factory(streaming=True, refresh_interval=60_000)
    upstream.push(sse("unleash-updated", {"events": [{"eventId": 2, "type": "feature-updated",
                                                     "feature": {"name": 5}}]}, 2))  # fmt: skip
    second = eventually(lambda: upstream.received(STREAMING)[1:], "a second connection")[0]
    assert "Last-Event-ID" not in second["headers"]
    assert names(proxy) == {"a"}  # the refused event changed nothing


@pytest.mark.parametrize("status", [401, 403, 404, 429, 501])
def test_a_refused_stream_falls_back_to_polling(
    status: int, upstream: StreamingStub, proxy_factory: Callable[..., ProxyUnderTest]
) -> None:
    upstream.stream_status = status
    upstream.payload = {"version": 2, "features": [flag("polled")], "segments": []}
    proxy = proxy_factory(streaming=True, refresh_interval=200)
    assert names(proxy) == {"polled"}
    upstream.payload = {"version": 2, "features": [flag("polled"), flag("later")], "segments": []}
    eventually(lambda: names(proxy) == {"polled", "later"}, "the polled change")
    assert len(upstream.received(STREAMING)) == 1  # not tried again within minutes


def test_fetch_mode_polling_then_back_to_streaming_when_a_poll_offers_it(
    upstream: StreamingStub, proxy_factory: Callable[..., ProxyUnderTest]
) -> None:
    upstream.payload = {"version": 2, "features": [flag("a")], "segments": []}
    upstream.connected = sse("fetch-mode", b"polling")  # the server's answer beyond its stream limit
    proxy = proxy_factory(streaming=True, refresh_interval=200)
    eventually(lambda: upstream.received(FEATURES), "a poll")
    assert names(proxy) == {"a"}
    # The upstream takes streams again and says so on a polled answer.
    upstream.connected = None
    upstream.features_headers = {"fetch-mode": "streaming"}
    upstream.payload = {"version": 2, "features": [flag("a"), flag("b")], "segments": []}
    eventually(lambda: upstream.streams_started == 2, "a stream again")
    polls = len(upstream.received(FEATURES))
    upstream.push(sse("unleash-updated", {"events": [{"eventId": 5, "type": "feature-updated",
                                                     "feature": flag("c")}]}, 5))  # fmt: skip
    eventually(lambda: names(proxy) == {"a", "b", "c"}, "the streamed change")
    assert len(upstream.received(FEATURES)) == polls  # streaming again: no more polls


def test_sigterm_with_a_stream_open_stops_cleanly(
    upstream: StreamingStub, proxy_factory: Callable[..., ProxyUnderTest]
) -> None:
    proxy = proxy_factory(streaming=True, refresh_interval=60_000)
    eventually(lambda: upstream.streams_started == 1, "an open stream")
    proxy.stop(signal.SIGTERM)
    assert proxy.popen.returncode == 0


SDK_TOKEN = "streaming-sdk-token"


def scraped(proxy: ProxyUnderTest, name: str, labels: dict[str, str] | None = None) -> float:
    """One sample of the proxy's Prometheus scrape, read with prometheus_client's parser (0 if absent)."""
    status, _, body = proxy.get("/proxy/internal-backstage/prometheus")
    assert status == 200, body
    return sum(
        sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
        if sample.name == name and (labels is None or sample.labels == labels)
    )


def test_a_patched_change_keeps_the_cache_unless_answers_change_and_reaches_body_and_backup(
    upstream: StreamingStub, proxy_factory: Callable[..., ProxyUnderTest], base_env: dict[str, str]
) -> None:
    """One worker patches each streamed change into the engine it serves (flagproxy/instance/patcher.py):
    an edit no answer reads keeps the cached answers, a switch does not; /proxy/client/features and its
    ETag, and the backup file, follow both."""
    upstream.payload = {"version": 2, "features": [flag("a"), flag("b")], "segments": []}
    proxy = proxy_factory(
        streaming=True,
        refresh_interval=60_000,
        enable_prometheus=True,
        exp_server_side_sdk_config_tokens=[SDK_TOKEN],
    )
    context = {"context": {"userId": "patched"}}

    def answer() -> bytes:
        status, _, body = proxy.post("/proxy", context, key=KEY)
        assert status == 200, body
        return body

    def features() -> tuple[dict[str, Any], str]:
        status, headers, body = proxy.get("/proxy/client/features", key=SDK_TOKEN)
        assert status == 200, body
        return json.loads(body), headers["etag"]

    def backup() -> dict[str, Any]:
        [path] = glob.glob(os.path.join(base_env["TMPDIR"], "flagproxy-backup-*.json"))
        return json.loads(Path(path).read_text())["features"]

    first = [answer() for _ in range(3)]  # the third is a cache hit
    hits = scraped(proxy, "flagproxy_response_cache_hits_total")
    assert hits >= 1 and len(set(first)) == 1
    _, etag = features()
    described = {**flag("a"), "description": "edited"}
    upstream.push(sse("unleash-updated", {"events": [{"eventId": 2, "type": "feature-updated",
                                                     "feature": described}]}, 2))  # fmt: skip
    eventually(lambda: features()[0]["features"][0].get("description") == "edited", "the edit in the body")
    assert features()[1] != etag
    assert answer() == first[0]
    assert scraped(proxy, "flagproxy_response_cache_hits_total") == hits + 1  # still cached
    eventually(lambda: backup()["features"][0].get("description") == "edited", "the edit in the backup")
    upstream.push(sse("unleash-updated", {"events": [{"eventId": 3, "type": "feature-updated",
                                                     "feature": flag("b", enabled=False)}]}, 3))  # fmt: skip
    eventually(lambda: [t["name"] for t in json.loads(answer())["toggles"]] == ["a"], "b switched off")
    assert scraped(proxy, "flagproxy_upstream_stream_changes_total", {"applied": "patched"}) == 2
    document, _ = features()
    assert document == {**upstream.payload, "features": [described, flag("b", enabled=False)]}
    eventually(lambda: backup() == document, "the switch in the backup")


def test_with_two_workers_each_patches_the_relayed_changes_and_a_replaced_worker_replays_them(
    upstream: StreamingStub, launch: Callable[..., Process]
) -> None:
    """`--workers 2`: the leader relays each change's events and each worker patches them in
    (flagproxy/instance/relay.py); a worker killed and replaced reads the whole revision, then replays
    every relayed change since, so it answers the same bytes as the other from its first request."""
    upstream.payload = {"version": 2, "features": [flag("a")], "segments": []}
    process = launch(
        {
            "SERVICE_URL": upstream.url,
            "SERVICE_API_TOKEN": "stub-server-token",
            "SERVICE_PROXY_CLIENT_KEYS": KEY,
            "SERVICE_FETCH_INTERVAL": "60000",
            "SERVICE_METRICS_INTERVAL": "0",
            "SERVICE_STREAMING": "true",
        },
        ["--workers", "2"],
    )
    process.wait_ready()
    wait_until_listening(process, 2)

    def every_worker(accept: Callable[[bytes], bool]) -> set[bytes]:
        """Each listening worker's body for GET /proxy once `accept(body)` holds for it."""
        found: dict[int, bytes] = {}

        def one_more() -> bool:
            status, _, body, worker = ask_worker(process, "GET", "/proxy", {"Authorization": KEY})
            assert status == 200, body
            if worker is not None and accept(body):
                found[worker] = body
            return set(found) >= listening_workers(process)

        eventually(one_more, "every worker's answer")
        return {found[worker] for worker in listening_workers(process)}

    for n, name in enumerate(["b", "c", "d"], start=2):
        upstream.push(sse("unleash-updated", {"events": [{"eventId": n, "type": "feature-updated",
                                                         "feature": flag(name)}]}, n))  # fmt: skip
    (both,) = every_worker(lambda body: b'"d"' in body)  # one body, byte for byte, on both workers
    assert [t["name"] for t in json.loads(both)["toggles"]] == ["a", "b", "c", "d"]
    assert upstream.received(FEATURES) == []
    before = listening_workers(process)
    os.kill(min(before), signal.SIGKILL)
    eventually(lambda: len(listening_workers(process) - before) == 1, "a replacement worker")
    assert every_worker(lambda body: True) == {both}
