"""What an edge asks the server: `POST /edge/validate` and `POST /api/client/metrics/bulk`, both databases."""

from __future__ import annotations

from tests.server.harness import (
    ADMIN_TOKEN,
    CLIENT_TOKEN,
    DEFAULT_PROJECT_CLIENT_TOKEN,
    FRONTEND_TOKEN,
    PROD_CLIENT_TOKEN,
    Api,
    assert_error,
    unique,
)


def test_validate_answers_the_valid_tokens_with_their_scope(api: Api) -> None:
    asked = [
        CLIENT_TOKEN,
        FRONTEND_TOKEN,
        DEFAULT_PROJECT_CLIENT_TOKEN,
        "*:development.made-up",
        "junk",
        ADMIN_TOKEN,
    ]
    answer = api.post("/edge/validate", {"tokens": asked}, token=None)
    assert answer.status == 200, answer.body
    tokens = {t["token"]: t for t in answer.json()["tokens"]}
    assert set(tokens) == {CLIENT_TOKEN, FRONTEND_TOKEN, DEFAULT_PROJECT_CLIENT_TOKEN}  # no admin token
    assert tokens[CLIENT_TOKEN] | {"status": None} == {
        "token": CLIENT_TOKEN, "type": "client", "environment": "development",
        "projects": ["*"], "status": None,
    }  # fmt: skip
    assert tokens[FRONTEND_TOKEN]["type"] == "frontend"
    assert tokens[DEFAULT_PROJECT_CLIENT_TOKEN]["projects"] == ["default"]


def test_validate_sees_a_deleted_token_go(api: Api) -> None:
    created = api.post(
        "/api/admin/api-tokens", {"tokenName": unique("t"), "type": "client", "environment": "development"}
    )
    secret = created.json()["secret"]
    assert [t["token"] for t in api.post("/edge/validate", {"tokens": [secret]}).json()["tokens"]] == [secret]
    assert api.delete(f"/api/admin/api-tokens/{secret}").status in (200, 204)
    assert api.post("/edge/validate", {"tokens": [secret]}).json()["tokens"] == []


def test_validate_bad_bodies(api: Api) -> None:
    assert_error(api.post("/edge/validate", {"tokens": "x"}, token=None), 400, "ValidationError", "tokens")
    assert_error(
        api.post("/edge/validate", {"tokens": ["a"] * 1001}, token=None), 400, "ValidationError", "tokens"
    )
    assert_error(api.post("/edge/validate", {}, token=None), 400, "ValidationError", "tokens")
    answer = api.request("POST", "/edge/validate", body=b"tokens", headers={"Content-Type": "text/plain"})
    assert answer.status == 415


def test_bulk_metrics_count_in_the_tokens_environment(api: Api) -> None:
    name = unique("bulk")
    api.create_feature(name)
    app_name = unique("app")
    body = {
        "applications": [
            {"appName": app_name, "instanceId": "edge-1", "strategies": ["default"], "interval": 15000,
             "started": "2026-01-01T00:00:00Z"},
        ],
        "metrics": [
            {"featureName": name, "appName": app_name, "environment": "development",
             "timestamp": "2026-01-01T00:00:00Z", "yes": 5, "no": 2, "variants": {"blue": 3}},
            {"featureName": unique("unknown"), "appName": app_name, "timestamp": "2026-01-01T00:00:00Z",
             "yes": 1},
        ],
    }  # fmt: skip
    answer = api.post("/api/client/metrics/bulk", body, token=CLIENT_TOKEN)
    assert (answer.status, answer.body) == (202, b"")
    # The production token's batch counts in production, whatever its entries say.
    assert api.post("/api/client/metrics/bulk", body, token=PROD_CLIENT_TOKEN).status == 202
    usage = api.get(f"/api/admin/client-metrics/features/{name}").json()
    counts = {row["environment"]: (row["yes"], row["no"], row["variants"]) for row in usage["lastHourUsage"]}
    assert counts == {"development": (5, 2, {"blue": 3}), "production": (5, 2, {"blue": 3})}
    applications = api.get("/api/admin/metrics/applications").json()["applications"]
    assert any(a["appName"] == app_name and a["instanceId"] == "edge-1" for a in applications)


def test_bulk_metrics_refusals(api: Api) -> None:
    body = {"applications": [], "metrics": []}
    assert_error(api.post("/api/client/metrics/bulk", body, token=None), 401, "AuthenticationRequired")
    assert_error(api.post("/api/client/metrics/bulk", body, token=FRONTEND_TOKEN), 403, "NoAccessError")
    bad = {"metrics": [{"featureName": "f", "appName": "a", "yes": -1}]}
    assert_error(
        api.post("/api/client/metrics/bulk", bad, token=CLIENT_TOKEN),
        400,
        "ValidationError",
        "metrics[0].yes",
    )
