"""`flagproxy edge` against a real `flagproxy server`: every route family, token statuses, environments."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest

from tests.edge.conftest import (
    DEFAULT_DEV_CLIENT,
    DEFAULT_DEV_FRONTEND,
    DEV_CLIENT,
    DEV_FRONTEND,
    PROD_CLIENT,
    PROD_FRONTEND,
)
from tests.edge.harness import EdgeProcess, edge
from tests.http.loopback import fetch
from tests.server.harness import ServerProcess


@pytest.fixture(scope="module")
def running(upstream_server: ServerProcess) -> Iterator[EdgeProcess]:
    """One edge serving development (every project) and production (every project)."""
    process = edge(upstream_server.url, [DEV_CLIENT, PROD_CLIENT])
    process.wait_ready()
    yield process
    process.stop()


def names(body: bytes) -> set[str]:
    document = orjson.loads(body)
    return {item["name"] for item in document.get("toggles", document.get("features", []))}


def test_client_features_are_the_tokens_environment_and_projects(running: EdgeProcess) -> None:
    status, _headers, body = running.get("/api/client/features", DEV_CLIENT)
    assert status == 200, body
    assert names(body) == {"everywhere", "prod-only", "other-flag"}
    flags = {f["name"]: f["enabled"] for f in orjson.loads(body)["features"]}
    assert flags == {"everywhere": True, "prod-only": False, "other-flag": True}
    production = {
        f["name"]: f["enabled"]
        for f in orjson.loads(running.get("/api/client/features", PROD_CLIENT)[2])["features"]
    }
    assert production["prod-only"] is True and production["other-flag"] is False
    # A project token covered by the `*` token sees only its project.
    status, _, body = running.get("/api/client/features", DEFAULT_DEV_CLIENT)
    assert status == 200 and names(body) == {"everywhere", "prod-only"}


def test_client_features_etag_and_304(running: EdgeProcess) -> None:
    status, headers, _body = running.get("/api/client/features", DEV_CLIENT)
    etag = headers["etag"]
    status, again, rest = running.get("/api/client/features", DEV_CLIENT, headers={"If-None-Match": etag})
    assert status == 304 and rest == b"" and again["etag"] == etag
    # Another project set has other bytes and another ETag.
    _, other, _ = running.get("/api/client/features", DEFAULT_DEV_CLIENT)
    assert other["etag"] != etag


@pytest.mark.parametrize(
    ("path", "token"), [("/api/frontend?userId=7", DEV_FRONTEND), ("/api/client/features", DEV_CLIENT)]
)
def test_304_is_the_proxys(running: EdgeProcess, path: str, token: str) -> None:
    """One 200/304 answer for both products (flagproxy/http/conditional.py), as Express's `fresh` decides
    it for the Node proxy: a request that says `Cache-Control: no-cache` gets the body whatever its
    If-None-Match; the 304 keeps ETag, Cache-control and CORS and drops Vary."""
    status, headers, body = running.get(path, token)
    assert status == 200 and body
    assert headers["cache-control"] == "public, max-age=2" and headers["vary"] == "Accept-Encoding"
    etag = headers["etag"]
    status, again, rest = running.get(path, token, headers={"If-None-Match": etag})
    assert (status, rest) == (304, b"")
    assert again["etag"] == etag and again["cache-control"] == "public, max-age=2" and "vary" not in again
    for cache_control in ("no-cache", "max-age=0, no-cache"):
        status, _, fresh = running.get(
            path, token, headers={"If-None-Match": etag, "Cache-Control": cache_control}
        )
        assert (status, fresh) == (200, body)


def test_client_features_name_prefix_and_one_feature(running: EdgeProcess) -> None:
    status, headers, body = running.get("/api/client/features?namePrefix=prod", DEV_CLIENT)
    assert status == 200 and names(body) == {"prod-only"}
    assert (
        running.get(
            "/api/client/features?namePrefix=prod", DEV_CLIENT, headers={"If-None-Match": headers["etag"]}
        )[0]
        == 304
    )
    status, _, body = running.get("/api/client/features/everywhere", DEV_CLIENT)
    assert status == 200 and orjson.loads(body)["name"] == "everywhere"
    assert running.get("/api/client/features/nope", DEV_CLIENT)[0] == 404
    assert running.get("/api/client/features/other-flag", DEFAULT_DEV_CLIENT)[0] == 404


@pytest.mark.parametrize("family", ["/api/frontend", "/api/proxy"])
def test_frontend_family(running: EdgeProcess, family: str) -> None:
    status, headers, body = running.get(f"{family}?userId=7", DEV_FRONTEND)
    assert status == 200, body
    assert names(body) == {"everywhere", "other-flag"}  # enabled only
    assert (
        running.get(f"{family}?userId=7", DEV_FRONTEND, headers={"If-None-Match": headers["etag"]})[0] == 304
    )
    status, _, body = running.post(family, DEV_FRONTEND, {"context": {"userId": "7"}})
    assert status == 200 and names(body) == {"everywhere", "other-flag"}
    status, _, body = running.get(f"{family}/all", DEV_FRONTEND)
    assert status == 200 and names(body) == {"everywhere", "other-flag", "prod-only"}
    status, _, body = running.post(f"{family}/all", DEV_FRONTEND, {"userId": "7"})  # Edge's body shape
    assert status == 200 and names(body) == {"everywhere", "other-flag", "prod-only"}
    metrics = {
        "appName": "web",
        "instanceId": "i1",
        "bucket": {
            "start": "2026-01-01T00:00:00Z",
            "stop": "2026-01-01T00:01:00Z",
            "toggles": {"everywhere": {"yes": 2, "no": 1}},
        },
    }
    assert running.post(f"{family}/client/metrics", DEV_FRONTEND, metrics)[0] == 202
    register = {
        "appName": "web",
        "instanceId": "i1",
        "interval": 1000,
        "started": "2026-01-01T00:00:00Z",
        "strategies": [],
    }
    assert running.post(f"{family}/client/register", DEV_FRONTEND, register)[0] == 202


def test_frontend_one_feature(running: EdgeProcess) -> None:
    status, _, body = running.get("/api/frontend/features/prod-only", DEV_FRONTEND)
    assert status == 200 and orjson.loads(body)["enabled"] is False
    status, _, body = running.get("/api/frontend/features/prod-only", PROD_FRONTEND)
    assert status == 200 and orjson.loads(body)["enabled"] is True
    assert running.get("/api/frontend/features/other-flag", DEFAULT_DEV_FRONTEND)[0] == 404
    assert running.get("/api/frontend/features/nope", DEV_FRONTEND)[0] == 404


def test_two_environments_do_not_talk(running: EdgeProcess) -> None:
    development = names(running.get("/api/frontend", DEV_FRONTEND)[2])
    production = names(running.get("/api/frontend", PROD_FRONTEND)[2])
    assert "prod-only" not in development and "prod-only" in production
    # A caller naming another environment in its context still reads its token's snapshot.
    assert "prod-only" not in names(running.get("/api/frontend?environment=production", DEV_FRONTEND)[2])


def test_a_project_token_sees_only_its_projects(running: EdgeProcess, other_frontend: str) -> None:
    assert names(running.get("/api/frontend/all", DEFAULT_DEV_FRONTEND)[2]) == {"everywhere", "prod-only"}
    assert names(running.get("/api/frontend/all", other_frontend)[2]) == {"other-flag"}


def test_token_statuses(running: EdgeProcess) -> None:
    assert running.get("/api/frontend")[0] == 401
    assert running.get("/api/client/features")[0] == 401
    assert running.get("/api/frontend", "not-a-token")[0] == 403
    assert running.get("/api/frontend", "*:development.made-up")[0] == 403
    assert running.get("/api/client/features", DEV_FRONTEND)[0] == 403  # frontend token, client route
    assert running.get("/api/frontend", DEV_CLIENT)[0] == 403  # client token, frontend route
    assert running.get("/api/frontend", "*:*.test-admin-secret")[0] == 403


def test_bad_input_is_a_4xx(running: EdgeProcess) -> None:
    status, _, body = running.request(
        "POST", "/api/frontend", DEV_FRONTEND, headers={"Content-Type": "application/json"}
    )
    assert status == 200  # an empty body is an empty context
    status, _, _ = running.request(
        "POST", "/api/frontend", DEV_FRONTEND, headers={"Content-Type": "text/plain"}
    )
    assert status == 415
    status, _, body = fetch(
        running.port,
        "POST",
        "/api/frontend",
        {"Authorization": DEV_FRONTEND, "Content-Type": "application/json"},
        b"{nope",
    )
    assert status == 400 and b"parse" in body
    status, _, _ = fetch(
        running.port,
        "POST",
        "/api/client/metrics",
        {"Authorization": DEV_CLIENT, "Content-Type": "application/json"},
        b'{"appName": 1}',
    )
    assert status == 400
    status, _, _ = fetch(
        running.port,
        "POST",
        "/api/frontend",
        {"Authorization": DEV_FRONTEND, "Content-Type": "application/json"},
        b"x" * 300_000,
    )
    assert status == 413
    status, _, body = running.get("/api/frontend?properties[a][b]=c", DEV_FRONTEND)
    assert status == 400
    assert running.get("/nowhere")[0] == 404
    assert running.request("DELETE", "/api/frontend", DEV_FRONTEND)[0] == 405
    assert running.get("/api/frontend", DEV_FRONTEND, headers={"X-Big": "x" * 20_000})[0] == 431


def test_health_ready_and_backstage(running: EdgeProcess) -> None:
    assert running.get("/internal-backstage/health") == (
        200,
        running.get("/internal-backstage/health")[1],
        b'{"status":"OK"}',
    )
    assert running.get("/internal-backstage/ready")[2] == b'{"status":"READY"}'
    status, _, body = running.get("/internal-backstage/tokens")
    assert status == 200
    assert b"test-client-secret" not in body and b"*:development.****" in body
    running.get("/api/frontend", DEV_FRONTEND)
    status, _, body = running.get("/internal-backstage/features")
    assert status == 200 and "everywhere" in orjson.loads(body)["development:*"]["features"]
    assert b"strategies" not in body and b"constraints" not in body
    status, headers, body = running.get("/internal-backstage/metrics")
    assert status == 200 and b"edge_ready 1" in body and headers["content-type"].startswith("text/plain")


def test_no_flag_internals_in_frontend_answers(running: EdgeProcess) -> None:
    for path in ("/api/frontend", "/api/frontend/all", "/api/frontend/features/everywhere"):
        body = running.get(path, DEV_FRONTEND)[2]
        for word in (b"strategies", b"constraints", b"segments", b"parameters"):
            assert word not in body, (path, word)


def test_cors(running: EdgeProcess) -> None:
    status, headers, _ = running.get("/api/frontend", DEV_FRONTEND, headers={"Origin": "https://app.example"})
    assert headers["access-control-allow-origin"] == "*"
    status, headers, _ = running.request(
        "OPTIONS",
        "/api/frontend",
        headers={"Origin": "https://app.example", "Access-Control-Request-Method": "GET"},
    )
    assert status == 204 and "GET" in headers["access-control-allow-methods"]


def test_multi_project_tokens(upstream_server: ServerProcess) -> None:
    """`[]:environment.secret` tokens: their projects come from the upstream, as a start-up token too."""
    api = upstream_server.api()

    def token(kind: str, projects: list[str]) -> str:
        body = {
            "tokenName": f"multi-{kind}",
            "type": kind,
            "environment": "development",
            "projects": projects,
        }
        answer = api.post("/api/admin/api-tokens", body)
        assert answer.status == 201, answer.body
        secret = str(answer.json()["secret"])
        assert secret.startswith("[]:development.")
        return secret

    client = token("client", ["default", "other"])
    frontend = token("frontend", ["default", "other"])
    process = edge(upstream_server.url, [client])
    try:
        process.wait_ready()
        assert names(process.get("/api/client/features", client)[2]) == {
            "everywhere",
            "prod-only",
            "other-flag",
        }
        assert names(process.get("/api/frontend/all", frontend)[2]) == {
            "everywhere",
            "prod-only",
            "other-flag",
        }
        assert process.get("/api/frontend", DEV_FRONTEND)[0] == 511  # every project: more than `[]` covers
        status, _, body = process.get("/api/frontend", DEFAULT_DEV_FRONTEND)
        assert status == 200 and names(body) == {"everywhere"}
    finally:
        process.stop()


def test_backstage_metrics_count_requests_by_route_and_status(running: EdgeProcess) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    def samples() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        status, _, body = running.get("/internal-backstage/metrics")
        assert status == 200
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body.decode())
            for s in family.samples
        }

    def requests(route: str, status: str) -> float:
        return samples().get(("flagproxy_http_requests_total", (("route", route), ("status", status))), 0.0)

    before_ok, before_unauthorized = requests("/api/frontend", "200"), requests("/api/frontend", "401")
    for _ in range(3):
        assert running.get("/api/frontend", DEV_FRONTEND)[0] == 200
    assert running.get("/api/frontend")[0] == 401
    assert running.get("/nowhere")[0] == 404
    # One process: its own counts are written before each scrape, so they are exact.
    assert requests("/api/frontend", "200") == before_ok + 3
    assert requests("/api/frontend", "401") == before_unauthorized + 1
    assert requests("fallback", "404") >= 1
    count = ("flagproxy_http_request_duration_seconds_count", (("route", "/api/frontend"),))
    assert samples()[count] >= before_ok + 4
    assert samples()[("edge_ready", ())] == 1  # the edge's own series are still there
