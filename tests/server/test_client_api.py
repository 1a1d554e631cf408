"""The client API: the Unleash wire format, filtering by token and query, ETag/304, metrics, register."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.server.harness import (
    CLIENT_TOKEN,
    PROD_CLIENT_TOKEN,
    Api,
    ServerProcess,
    assert_error,
    base_env,
    unique,
)


def _feature(payload: dict[str, Any], name: str) -> dict[str, Any]:
    return next(f for f in payload["features"] if f["name"] == name)


def test_wire_format(api: Api) -> None:
    name = unique("wire")
    segment = api.create_segment(
        unique("seg"), [{"contextName": "userId", "operator": "IN", "values": ["1"]}]
    )
    api.create_feature(name, description="d", impressionData=True)
    api.add_strategy(
        name,
        {
            "name": "flexibleRollout",
            "parameters": {"rollout": "50", "stickiness": "default", "groupId": name},
            "constraints": [{"contextName": "appName", "operator": "IN", "values": ["web"]}],
            "segments": [segment["id"]],
            "variants": [{"name": "blue", "weight": 1000, "weightType": "fix", "stickiness": "default",
                          "payload": {"type": "string", "value": "b"}}],
        },
    )  # fmt: skip
    api.add_strategy(name, {"name": "default", "disabled": True})
    api.switch(name, True)
    payload = api.client_features(query=f"?namePrefix={name}")
    assert payload["version"] == 2
    assert set(payload) >= {"version", "features", "segments", "query", "meta"}
    feature = _feature(payload, name)
    assert feature == {
        "name": name,
        "type": "release",
        "description": "d",
        "project": "default",
        "enabled": True,
        "stale": False,
        "impressionData": True,
        "strategies": [
            {
                "name": "flexibleRollout",
                "constraints": [
                    {"contextName": "appName", "operator": "IN", "values": ["web"], "inverted": False,
                     "caseInsensitive": False}
                ],
                "parameters": {"rollout": "50", "stickiness": "default", "groupId": name},
                "variants": [{"name": "blue", "weight": 1000, "weightType": "fix", "stickiness": "default",
                              "payload": {"type": "string", "value": "b"}}],
                "segments": [segment["id"]],
            }
        ],  # the disabled strategy is not sent (SPEC.md, E2)
        "variants": [],
    }  # fmt: skip
    assert payload["segments"] == [
        {"id": segment["id"], "name": segment["name"], "constraints": segment["constraints"]}
    ]


def test_segments_are_inlined_for_sdks_without_the_spec_header(api: Api) -> None:
    name = unique("inline")
    segment = api.create_segment(
        unique("seg"), [{"contextName": "userId", "operator": "IN", "values": ["1"]}]
    )
    api.create_feature(name)
    api.add_strategy(name, {"name": "default", "segments": [segment["id"]]})
    payload = api.client_features(query=f"?namePrefix={name}", spec=None)
    assert "segments" not in payload
    strategy = _feature(payload, name)["strategies"][0]
    assert "segments" not in strategy
    assert strategy["constraints"] == segment["constraints"]


def test_environment_comes_from_the_token(api: Api) -> None:
    name = unique("envs")
    api.create_feature(name)
    api.switch(name, True, "production")
    api.put(
        f"/api/admin/projects/default/features/{name}/environments/production/variants",
        [{"name": "v", "weightType": "variable", "stickiness": "default"}],
    )
    development = _feature(api.client_features(query=f"?namePrefix={name}"), name)
    production = _feature(api.client_features(PROD_CLIENT_TOKEN, f"?namePrefix={name}"), name)
    assert (
        development["enabled"] is False and development["strategies"] == [] and development["variants"] == []
    )
    assert production["enabled"] is True and production["variants"][0]["weight"] == 1000
    assert api.client_features(query="?environment=production")["query"]["environment"] == "development"


def test_project_scoped_token_and_query_filters(api: Api) -> None:
    project = unique("proj")
    api.post("/api/admin/projects", {"id": project, "name": "P"})
    mine, other = unique("mine"), unique("other")
    api.create_feature(mine, project=project, tags=[{"type": "simple", "value": "team-x"}])
    api.create_feature(other)
    token = api.post(
        "/api/admin/api-tokens", {"tokenName": unique("t"), "type": "client", "projects": [project]}
    ).json()["secret"]
    scoped = [f["name"] for f in api.client_features(token)["features"]]
    assert scoped == [mine]
    # The token's projects beat the query's.
    assert [f["name"] for f in api.client_features(token, "?project=default")["features"]] == [mine]
    everything = api.client_features(query=f"?project={project}")
    assert [f["name"] for f in everything["features"]] == [mine]
    tagged = api.client_features(query="?tag=simple:team-x")
    assert [f["name"] for f in tagged["features"]] == [mine]
    assert_error(
        api.get("/api/client/features?tag=bad", token=CLIENT_TOKEN), 400, "ValidationError", "tag[0]"
    )


def test_archived_features_are_not_served(api: Api) -> None:
    name = unique("archived")
    api.create_feature(name)
    api.delete(f"/api/admin/projects/default/features/{name}")
    assert api.client_features(query=f"?namePrefix={name}")["features"] == []


def test_etag_and_304(api: Api) -> None:
    query = f"/api/client/features?namePrefix={unique('etag')}"
    first = api.get(query, token=CLIENT_TOKEN)
    etag = first.headers["etag"]
    assert first.json()["meta"]["etag"] == etag
    again = api.get(query, token=CLIENT_TOKEN)
    assert again.headers["etag"] == etag and again.body == first.body
    not_modified = api.get(query, token=CLIENT_TOKEN, headers={"If-None-Match": etag})
    assert (not_modified.status, not_modified.body) == (304, b"")
    api.create_feature(unique("change"))
    changed = api.get(query, token=CLIENT_TOKEN, headers={"If-None-Match": etag})
    assert changed.status == 200 and changed.headers["etag"] != etag


def test_metrics_set_last_seen_and_usage_counts(api: Api) -> None:
    name = unique("seen")
    api.create_feature(name)
    metrics = {
        "appName": "checkout-service",
        "instanceId": "i-1",
        "bucket": {
            "start": "2026-01-01T00:00:00Z",
            "stop": "2026-01-01T00:01:00Z",
            "toggles": {name: {"yes": 3, "no": 1, "variants": {"blue": 2}}, unique("unknown"): {"yes": 1}},
        },
    }
    for token in (CLIENT_TOKEN, CLIENT_TOKEN, PROD_CLIENT_TOKEN):
        answer = api.post("/api/client/metrics", metrics, token=token)
        assert (answer.status, answer.body) == (202, b"")
    feature = api.listed_feature(name)
    development, production = feature["environments"][:2]
    assert development["lastSeenAt"] and production["lastSeenAt"]
    assert feature["lastSeenAt"] == max(development["lastSeenAt"], production["lastSeenAt"])
    assert feature["lifecycle"]["stage"] == "live"
    usage = api.get(f"/api/admin/client-metrics/features/{name}").json()
    counts = {row["environment"]: (row["yes"], row["no"], row["variants"]) for row in usage["lastHourUsage"]}
    assert counts == {"development": (6, 2, {"blue": 4}), "production": (3, 1, {"blue": 2})}
    assert usage["seenApplications"] == ["checkout-service"]
    invalid = api.post("/api/client/metrics", {"appName": "x", "bucket": {"toggles": {"f": {"yes": -1}}}},
                       token=CLIENT_TOKEN)  # fmt: skip
    assert_error(invalid, 400, "ValidationError", "bucket.toggles.f.yes")
    assert_error(api.post("/api/client/metrics", metrics), 403, "NoAccessError")  # an admin token


def test_register(api: Api) -> None:
    app_name = unique("app")
    body = {
        "appName": app_name,
        "instanceId": "i-9",
        "sdkVersion": "unleash-client-python:6.9.1",
        "strategies": ["default", "flexibleRollout"],
        "interval": 15000,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    answer = api.post("/api/client/register", body, token=CLIENT_TOKEN)
    assert (answer.status, answer.body) == (202, b"")
    applications = api.get("/api/admin/metrics/applications").json()["applications"]
    registered = next(a for a in applications if a["appName"] == app_name)
    assert registered["instanceId"] == "i-9" and registered["strategies"] == ["default", "flexibleRollout"]
    assert registered["environment"] == "development"
    missing = api.post("/api/client/register", {"instanceId": "x"}, token=CLIENT_TOKEN)
    assert_error(missing, 400, "ValidationError", "appName")
    not_a_number = api.post("/api/client/register", {"appName": "a", "interval": "x"}, token=CLIENT_TOKEN)
    assert_error(not_a_number, 400, "ValidationError", "interval")


def test_single_feature_route(api: Api) -> None:
    name = unique("one")
    api.create_feature(name)
    answer = api.get(f"/api/client/features/{name}", token=CLIENT_TOKEN)
    assert answer.status == 200 and answer.json()["name"] == name
    assert_error(api.get(f"/api/client/features/{unique('nope')}", token=CLIENT_TOKEN), 404, "NotFoundError")


def test_payload_bytes_are_built_once_per_data_change(
    backend: str, backend_env: Callable[[str], dict[str, str]], tmp_path: Path
) -> None:
    # The server logs each build at debug level; the log is what shows how often bytes were built.
    log = tmp_path / "server.log"
    server = ServerProcess(base_env(**backend_env(backend), LOG_LEVEL="debug"), log_path=str(log)).start()
    try:
        api = server.api()

        def builds() -> int:
            return log.read_text().count("client features built")

        def fetch(query: str = "", etag: str | None = None) -> str:
            headers = {"If-None-Match": etag} if etag else {}
            answer = api.get(f"/api/client/features{query}", token=CLIENT_TOKEN, headers=headers)
            assert answer.status == (304 if etag else 200)
            return answer.headers["etag"]

        etag = fetch()
        assert builds() == 1
        for _ in range(3):
            assert fetch() == etag
        fetch(etag=etag)
        assert builds() == 1  # the same query at the same data revision: the same bytes
        fetch("?namePrefix=a")
        assert builds() == 2  # another query has bytes of its own
        # Changes that do not alter what is served leave the bytes as they are.
        api.post("/api/admin/projects", {"id": unique("p"), "name": "P"})
        api.post("/api/admin/api-tokens", {"tokenName": unique("t"), "type": "client"})
        api.create_segment(unique("unused"), [])
        assert fetch() == etag and builds() == 2
        api.create_feature(unique("new"))
        changed = fetch()
        assert changed != etag and builds() == 3
        assert fetch() == changed and builds() == 3
    finally:
        assert server.stop() == 0, log.read_text()
