"""A two-level chain: `flagproxy server` ← edge A ← edge B. Validation, features and metrics flow through."""

from __future__ import annotations

import time
from collections.abc import Iterator

import orjson
import pytest

from tests.edge.conftest import DEV_CLIENT, DEV_FRONTEND, PROD_CLIENT
from tests.edge.harness import EdgeProcess, edge
from tests.server.harness import Api, ServerProcess, unique


@pytest.fixture(scope="module")
def chain(upstream_server: ServerProcess) -> Iterator[tuple[EdgeProcess, EdgeProcess]]:
    fast = ("--metrics-interval-seconds", "1", "--token-revalidation-interval-seconds", "1")
    first = edge(upstream_server.url, [DEV_CLIENT, PROD_CLIENT], *fast)
    first.wait_ready()
    second = edge(f"http://127.0.0.1:{first.port}", [DEV_CLIENT], *fast)
    try:
        second.wait_ready()
        yield first, second
    finally:
        second.stop()
        first.stop()


def test_features_and_evaluations_flow_through(chain: tuple[EdgeProcess, EdgeProcess]) -> None:
    first, second = chain
    at_first = orjson.loads(first.get("/api/client/features", DEV_CLIENT)[2])
    at_second = orjson.loads(second.get("/api/client/features", DEV_CLIENT)[2])
    assert at_second["features"] == at_first["features"]
    status, _, body = second.get("/api/frontend/all?userId=3", DEV_FRONTEND)
    assert status == 200
    assert body == first.get("/api/frontend/all?userId=3", DEV_FRONTEND)[2]
    assert second.get("/api/frontend", "*:development.made-up")[0] == 403


def test_a_token_revoked_at_the_top_stops_working_at_the_bottom(
    chain: tuple[EdgeProcess, EdgeProcess], admin: Api
) -> None:
    _, second = chain
    created = admin.post(
        "/api/admin/api-tokens",
        {"tokenName": unique("chain"), "type": "frontend", "environment": "development"},
    )
    secret = created.json()["secret"]
    assert second.get("/api/frontend", secret)[0] == 200
    assert admin.delete(f"/api/admin/api-tokens/{secret}").status in (200, 204)
    deadline = time.monotonic() + 20
    while second.get("/api/frontend", secret)[0] == 200:
        assert time.monotonic() < deadline, "the revoked token still works at the bottom of the chain"
        time.sleep(0.2)
    assert second.get("/api/frontend", secret)[0] == 403


def test_metrics_reach_the_top(chain: tuple[EdgeProcess, EdgeProcess], admin: Api) -> None:
    _, second = chain
    bucket = {
        "appName": unique("chain-app"),
        "instanceId": "i-1",
        "bucket": {"start": "2026-01-01T00:00:00Z", "stop": "2026-01-01T00:01:00Z",
                   "toggles": {"everywhere": {"yes": 4, "no": 1}}},
    }  # fmt: skip
    assert second.post("/api/frontend/client/metrics", DEV_FRONTEND, bucket)[0] == 202
    deadline = time.monotonic() + 20
    while True:
        usage = admin.get("/api/admin/client-metrics/features/everywhere").json()["lastHourUsage"]
        rows = [(r["environment"], r["yes"], r["no"]) for r in usage if r["appName"] == bucket["appName"]]
        if rows:
            break
        assert time.monotonic() < deadline, "the counts never reached the server"
        time.sleep(0.2)
    assert rows == [("development", 4, 1)]
