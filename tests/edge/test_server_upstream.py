"""The edge's token and usage contracts against a real `flagproxy server` upstream (tests/edge/conftest.py's
`upstream_server`), with every token made and revoked through the server's admin API: the server's
`/edge/validate` decides which tokens pass, a revoked one stops working at revalidation, strict and
dynamic modes cover the environments the server's tokens say, and usage arrives in the server's records.
tests/edge/test_tokens.py and test_usage.py run the same contracts against the counting stand-in, which
alone can count the upstream's calls, delay them or fail them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest

from tests.edge.harness import EdgeProcess, edge
from tests.server.harness import ADMIN_TOKEN, Api, ServerProcess, unique

DEVELOPMENT_FLAGS = {"everywhere", "other-flag"}  # on in development (conftest's upstream_server)
PRODUCTION_FLAGS = {"everywhere", "prod-only"}


def make_token(api: Api, kind: str, environment: str, projects: list[str] | None = None) -> str:
    body: dict[str, Any] = {"tokenName": unique("edge"), "type": kind, "environment": environment}
    if projects is not None:
        body["projects"] = projects
    answer = api.post("/api/admin/api-tokens", body)
    assert answer.status == 201, answer.body
    return str(answer.json()["secret"])


@pytest.fixture
def start(upstream_server: ServerProcess) -> Iterator[Callable[..., EdgeProcess]]:
    started: list[EdgeProcess] = []

    def run(tokens: list[str], *extra: str) -> EdgeProcess:
        process = edge(upstream_server.url, tokens, *extra)
        started.append(process)
        process.wait_ready()
        return process

    yield run
    for process in started:
        process.stop()


def enabled_names(body: bytes) -> set[str]:
    return {t["name"] for t in orjson.loads(body)["toggles"]}


def wait_until_refused(process: EdgeProcess, path: str, token: str, timeout: float = 15) -> int:
    deadline = time.monotonic() + timeout
    while (status := process.get(path, token)[0]) == 200:
        assert time.monotonic() < deadline, f"{path} still answers 200 for a revoked token"
        time.sleep(0.2)
    return status


def test_the_servers_tokens_pass_and_no_others(start: Callable[..., EdgeProcess], admin: Api) -> None:
    sync = make_token(admin, "client", "development")
    frontend = make_token(admin, "frontend", "development")
    process = start([sync])
    status, _, body = process.get("/api/frontend", frontend)
    assert status == 200 and enabled_names(body) == DEVELOPMENT_FLAGS
    status, _, body = process.get("/api/client/features", sync)
    assert status == 200 and {f["name"] for f in orjson.loads(body)["features"]} >= DEVELOPMENT_FLAGS
    # The server vouches for neither a made-up secret of a valid shape nor an admin token.
    for refused in (f"*:development.{unique('made-up')}", ADMIN_TOKEN):
        assert process.get("/api/frontend", refused)[0] == 403, refused
        assert process.get("/api/client/features", refused)[0] == 403, refused
    # A frontend token is no client token, and the other way round.
    assert process.get("/api/client/features", frontend)[0] == 403
    assert process.get("/api/frontend", sync)[0] == 403


def test_a_project_token_of_the_server_sees_its_projects(
    start: Callable[..., EdgeProcess], admin: Api
) -> None:
    process = start([make_token(admin, "client", "development")])
    narrow_client = make_token(admin, "client", "development", ["default"])
    status, _, body = process.get("/api/client/features", narrow_client)
    assert status == 200 and {f["name"] for f in orjson.loads(body)["features"]} == {
        "everywhere",
        "prod-only",
    }
    narrow_frontend = make_token(admin, "frontend", "development", ["other"])
    status, _, body = process.get("/api/frontend", narrow_frontend)
    assert status == 200 and enabled_names(body) == {"other-flag"}


def test_a_token_revoked_on_the_server_stops_working(start: Callable[..., EdgeProcess], admin: Api) -> None:
    frontend = make_token(admin, "frontend", "development")
    client = make_token(admin, "client", "development", ["default"])
    process = start(
        [make_token(admin, "client", "development")], "--token-revalidation-interval-seconds", "1"
    )
    assert process.get("/api/frontend", frontend)[0] == 200
    assert process.get("/api/client/features", client)[0] == 200
    for secret in (frontend, client):
        assert admin.delete(f"/api/admin/api-tokens/{secret}").status == 200
    assert wait_until_refused(process, "/api/frontend", frontend) == 403
    assert wait_until_refused(process, "/api/client/features", client) == 403


def test_a_revoked_sync_token_keeps_the_last_flags_and_says_so(
    start: Callable[..., EdgeProcess], admin: Api
) -> None:
    sync = make_token(admin, "client", "development")
    frontend = make_token(admin, "frontend", "development")
    process = start([sync])
    assert enabled_names(process.get("/api/frontend", frontend)[2]) == DEVELOPMENT_FLAGS
    assert admin.delete(f"/api/admin/api-tokens/{sync}").status == 200
    said = process.read_until("is not allowed to read features")  # its next poll is refused
    assert "the --tokens token *:development.****" in said and sync.split(".", 1)[1] not in said
    status, _, body = process.get("/api/frontend", frontend)
    assert status == 200 and enabled_names(body) == DEVELOPMENT_FLAGS  # the last good flags


def test_strict_covers_only_the_start_up_tokens_environments(
    start: Callable[..., EdgeProcess], admin: Api
) -> None:
    process = start([make_token(admin, "client", "development")])
    status, _, body = process.get("/api/frontend", make_token(admin, "frontend", "production"))
    assert status == 511
    assert orjson.loads(body)["access"] == {"environment": "production", "project": "*"}
    assert process.get("/api/client/features", make_token(admin, "client", "production"))[0] == 403


def test_dynamic_syncs_the_environment_of_a_new_client_token(
    start: Callable[..., EdgeProcess], admin: Api
) -> None:
    process = start([make_token(admin, "client", "development")], "--dynamic")
    production_frontend = make_token(admin, "frontend", "production")
    assert process.get("/api/frontend", production_frontend)[0] == 511
    status, _, body = process.get("/api/client/features", make_token(admin, "client", "production"))
    assert status == 200, body
    enabled = {f["name"] for f in orjson.loads(body)["features"] if f["enabled"]}
    assert enabled == PRODUCTION_FLAGS
    status, _, body = process.get("/api/frontend", production_frontend)  # now covered
    assert status == 200 and enabled_names(body) == PRODUCTION_FLAGS


def test_usage_lands_in_the_servers_records_per_environment(
    start: Callable[..., EdgeProcess], admin: Api
) -> None:
    development, production = (make_token(admin, "client", e) for e in ("development", "production"))
    process = start([development, production], "--metrics-interval-seconds", "1")
    app = unique("edge-usage")

    def bucket(toggles: dict[str, Any]) -> dict[str, Any]:
        window = {"start": "2026-01-01T00:00:00Z", "stop": "2026-01-01T00:01:00Z", "toggles": toggles}
        return {"appName": app, "instanceId": "i-1", "bucket": window}

    frontend = make_token(admin, "frontend", "development")
    sent = (
        ("/api/client/metrics", development, {"everywhere": {"yes": 3, "no": 1}}),
        ("/api/frontend/client/metrics", frontend, {"everywhere": {"yes": 2}}),
        ("/api/client/metrics", production, {"everywhere": {"no": 4}}),
    )
    for path, token, toggles in sent:
        assert process.post(path, token, bucket(toggles))[0] == 202, path
    wanted = {("development", 5, 1), ("production", 0, 4)}
    deadline = time.monotonic() + 20
    while True:
        usage = admin.get("/api/admin/client-metrics/features/everywhere").json()["lastHourUsage"]
        seen = {(u["environment"], u["yes"], u["no"]) for u in usage if u["appName"] == app}
        if seen == wanted:
            break
        assert time.monotonic() < deadline, seen
        time.sleep(0.2)
