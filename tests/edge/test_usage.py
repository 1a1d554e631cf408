"""Usage metrics: counted per environment, sent in bulk in batches under 95 kB with a token of their
environment, nothing lost while the upstream refuses them, bounded memory. The counting stand-in shows each
batch's size and token and can refuse them; tests/edge/test_server_upstream.py checks that usage lands in a
real `flagproxy server`'s records."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from flagproxy.edge.usage import EdgeUsage
from tests.edge.harness import CountingUpstream, EdgeProcess, edge, features_doc

DEV_CLIENT = "*:development.sync-secret"
PROD_CLIENT = "*:production.prod-sync-secret"
DEV_FRONTEND = "*:development.frontend-secret"
PROD_FRONTEND = "*:production.frontend-prod-secret"


def bucket(toggles: dict[str, dict[str, Any]], app: str = "web") -> dict[str, Any]:
    return {
        "appName": app,
        "instanceId": "i-1",
        "bucket": {"start": "2026-01-01T00:00:00Z", "stop": "2026-01-01T00:01:00Z", "toggles": toggles},
    }


@pytest.fixture
def running(counting: CountingUpstream) -> Iterator[EdgeProcess]:
    counting.add(DEV_CLIENT, "client", "development", ["*"], features_doc(("f", "default", True)))
    counting.add(PROD_CLIENT, "client", "production", ["*"], features_doc(("f", "default", True)))
    counting.add(DEV_FRONTEND, "frontend", "development", ["*"])
    counting.add(PROD_FRONTEND, "frontend", "production", ["*"])
    process = edge(counting.url, [DEV_CLIENT, PROD_CLIENT], "--metrics-interval-seconds", "1")
    process.wait_ready()
    yield process
    process.stop()


def totals(requests: list[dict[str, Any]]) -> dict[tuple[str, str, str], list[int]]:
    """(token, environment, feature) -> [yes, no] over the batches the upstream took."""
    found: dict[tuple[str, str, str], list[int]] = {}
    for request in requests:
        if request["status"] != 202:
            continue
        for metric in request["body"]["metrics"]:
            key = (request["token"], metric["environment"], metric["featureName"])
            entry = found.setdefault(key, [0, 0])
            entry[0] += metric["yes"]
            entry[1] += metric["no"]
    return found


def wait_for_totals(counting: CountingUpstream, wanted: dict, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while totals(counting.received("/api/client/metrics/bulk")) != wanted:
        assert time.monotonic() < deadline, (totals(counting.received("/api/client/metrics/bulk")), wanted)
        time.sleep(0.1)


def test_usage_goes_upstream_per_environment_with_its_token(
    running: EdgeProcess, counting: CountingUpstream
) -> None:
    assert (
        running.post("/api/frontend/client/metrics", DEV_FRONTEND, bucket({"f": {"yes": 3, "no": 1}}))[0]
        == 202
    )
    assert running.post("/api/proxy/client/metrics", DEV_FRONTEND, bucket({"f": {"yes": 1}}))[0] == 202
    assert running.post("/api/client/metrics", PROD_CLIENT, bucket({"f": {"no": 2}}, "api"))[0] == 202
    register = {
        "appName": "api",
        "instanceId": "i-1",
        "interval": 1000,
        "started": "2026-01-01T00:00:00Z",
        "strategies": ["default"],
    }
    assert running.post("/api/client/register", PROD_CLIENT, register)[0] == 202
    wait_for_totals(
        counting,
        {(DEV_CLIENT, "development", "f"): [4, 1], (PROD_CLIENT, "production", "f"): [0, 2]},
    )
    production = [r for r in counting.received("/api/client/metrics/bulk") if r["token"] == PROD_CLIENT]
    applications = [a for r in production for a in r["body"]["applications"]]
    assert any(a["appName"] == "api" and a["environment"] == "production" for a in applications)


# The bounds docs/edge.md states, written down here rather than read from flagproxy/edge/usage.py: a batch's
# JSON under 95 KiB (Unleash Edge's BATCH_BODY_SIZE, 95 * 1024, under Unleash's 100 kB body limit), and at
# most 50,000 (environment, app, flag) counts kept.
BATCH_BYTES = 95 * 1024
MAX_ENTRIES = 50_000


def test_batches_stay_under_95_kb(running: EdgeProcess, counting: CountingUpstream) -> None:
    names = [f"a-rather-long-feature-flag-name-for-batching-{i:05d}" for i in range(3000)]
    for start in range(0, len(names), 300):
        toggles = {name: {"yes": 1, "no": 2, "variants": {"blue": 1}} for name in names[start : start + 300]}
        assert running.post("/api/client/metrics", DEV_CLIENT, bucket(toggles))[0] == 202
    wanted = {(DEV_CLIENT, "development", name): [1, 2] for name in names}
    wait_for_totals(counting, wanted)
    sizes = [r["size"] for r in counting.received("/api/client/metrics/bulk")]
    assert len(sizes) > 1 and max(sizes) < BATCH_BYTES


def test_nothing_is_lost_while_the_upstream_refuses(running: EdgeProcess, counting: CountingUpstream) -> None:
    counting.post_status = 503
    for _ in range(3):
        assert running.post("/api/client/metrics", DEV_CLIENT, bucket({"g": {"yes": 1}}))[0] == 202
    counting.wait_for("/api/client/metrics/bulk", 2)  # refused at least twice
    assert running.post("/api/client/metrics", DEV_CLIENT, bucket({"g": {"no": 5}}))[0] == 202
    counting.post_status = 202
    wait_for_totals(counting, {(DEV_CLIENT, "development", "g"): [3, 5]})


def test_bad_metrics_are_400(running: EdgeProcess) -> None:
    assert running.post("/api/client/metrics", DEV_CLIENT, {"appName": "x"})[0] == 400
    assert running.post("/api/client/metrics", DEV_CLIENT, bucket({"f": {"yes": -1}}))[0] == 400
    assert running.post("/api/client/metrics/bulk", DEV_CLIENT, {"metrics": [{"featureName": "f"}]})[0] == 400
    assert running.post("/api/client/metrics/bulk", DEV_CLIENT, [])[0] == 400
    assert running.post("/api/client/metrics/bulk", DEV_FRONTEND, {"metrics": []})[0] == 403


def test_memory_is_bounded_and_overflow_is_counted() -> None:
    metrics = EdgeUsage()
    for i in range(MAX_ENTRIES + 10):
        metrics.add("development", "web", f"flag-{i}", 1, 1, {}, "2026-01-01T00:00:00Z")
    assert len(metrics.counts) == MAX_ENTRIES and metrics.dropped == 20
    taken = metrics.take()
    assert not metrics and len(taken.counts) == MAX_ENTRIES
    metrics.add("development", "web", "new", 1, 0, {}, "2026-01-01T00:00:00Z")
    metrics.give_back(taken)  # a failed send put back: still bounded
    assert len(metrics.counts) == MAX_ENTRIES
    bodies = list(metrics.batches("development"))
    assert all(len(body) < BATCH_BYTES for body, _ in bodies)
    assert sum(len(held.counts) for _, held in bodies) == MAX_ENTRIES


def test_the_last_counts_go_when_the_instance_stops(counting: CountingUpstream) -> None:
    counting.add(DEV_CLIENT, "client", "development", ["*"], features_doc(("f", "default", True)))
    process = edge(counting.url, [DEV_CLIENT], "--metrics-interval-seconds", "3600")
    try:
        process.wait_ready()
        assert process.post("/api/client/metrics", DEV_CLIENT, bucket({"last": {"yes": 7}}))[0] == 202
    finally:
        process.stop()
    assert totals(counting.received("/api/client/metrics/bulk")) == {
        (DEV_CLIENT, "development", "last"): [7, 0]
    }
