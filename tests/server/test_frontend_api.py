"""The server's frontend API (frontend tokens), checked against the official Python SDK; both databases."""

from __future__ import annotations

from pathlib import Path

from tests.sdk.oracle import depends_on_randomness, python_answers
from tests.server.harness import CLIENT_TOKEN, FRONTEND_TOKEN, Api, ServerProcess, assert_error, unique


def toggles(api: Api, path: str, token: str = FRONTEND_TOKEN, **kwargs: object) -> dict[str, dict]:
    answer = api.request(kwargs.pop("method", "GET"), path, token=token, **kwargs)  # type: ignore[arg-type]
    assert answer.status == 200, answer.body
    return {t["name"]: t for t in answer.json()["toggles"]}


def test_enabled_and_all_in_the_tokens_environment(api: Api) -> None:
    on, off, prod = unique("on"), unique("off"), unique("prod")
    strategy = {"name": "default", "constraints": [], "parameters": {}}
    for name in (on, off, prod):
        api.create_feature(name)
        api.add_strategy(name, strategy)
        api.add_strategy(name, strategy, "production")
    api.switch(on, True)
    api.switch(prod, True, "production")
    enabled = toggles(api, "/api/frontend")
    assert on in enabled and off not in enabled and prod not in enabled
    assert enabled[on]["enabled"] is True and enabled[on]["variant"]["name"] == "disabled"
    everything = toggles(api, "/api/frontend/all")
    assert everything[off]["enabled"] is False and everything[prod]["enabled"] is False
    body = api.get("/api/frontend/all", token=FRONTEND_TOKEN).body
    for word in (b"strategies", b"constraints", b"segments", b"parameters"):
        assert word not in body


def test_the_context_decides(api: Api) -> None:
    name = unique("ctx")
    api.create_feature(name)
    constraint = {"contextName": "region", "operator": "IN", "values": ["eu"]}
    api.add_strategy(name, {"name": "default", "constraints": [constraint], "parameters": {}})
    api.switch(name, True)
    assert name in toggles(api, "/api/frontend?properties[region]=eu")
    assert name in toggles(api, "/api/frontend?region=eu")
    assert name not in toggles(api, "/api/frontend?properties[region]=us")
    post = {"context": {"properties": {"region": "eu"}}}
    assert name in toggles(api, "/api/frontend", method="POST", json=post)
    us = toggles(api, "/api/frontend/all", method="POST", json={"context": {"region": "us"}})
    assert us[name]["enabled"] is False


def _flag(api: Api, strategy: dict) -> str:
    name = unique("ctx")
    api.create_feature(name)
    api.add_strategy(name, {"constraints": [], "parameters": {}, **strategy})
    api.switch(name, True)
    return name


def test_the_context_is_read_as_the_proxy_and_edge_read_it(api: Api) -> None:
    """The divergences the server had from `flagproxy proxy` and `flagproxy edge` (one parser now)."""

    def on(name: str, context: dict) -> bool:
        return toggles(api, "/api/frontend/all", method="POST", json={"context": context})[name]["enabled"]

    one = _flag(
        api, {"name": "default", "constraints": [{"contextName": "n", "operator": "IN", "values": ["1"]}]}
    )
    assert on(one, {"properties": {"n": 1.0}}) and on(one, {"n": 1}) and on(one, {"n": "1"})  # 1.0 was "1.0"
    nothing = _flag(
        api, {"name": "default", "constraints": [{"contextName": "p", "operator": "NOT_IN", "values": ["x"]}]}
    )
    assert on(nothing, {"properties": {"p": None}, "userId": None})  # null was a 400
    after = {"contextName": "currentTime", "operator": "DATE_AFTER", "value": "2024-01-01T00:30:00.000Z"}
    dated = _flag(api, {"name": "default", "constraints": [after]})
    assert on(dated, {"currentTime": "2024-01-01T01:00:00"})  # no offset: UTC, was unreadable to the engine
    assert not on(dated, {"currentTime": "2024-01-01T01:00:00+01:00"})
    local = _flag(api, {"name": "remoteAddress", "parameters": {"IPs": "127.0.0.1"}})
    assert on(local, {"remoteAddress": ""})  # "" leaves the connection's address (it replaced it)
    listed = _flag(api, {"name": "userWithId", "parameters": {"userIds": "u1"}})
    assert on(listed, {"userId": "", "properties": {"userId": "u1"}})  # an empty field hides no property
    sessions = _flag(
        api,
        {
            "name": "flexibleRollout",
            "parameters": {"rollout": "100", "stickiness": "sessionId", "groupId": "g"},
        },
    )
    assert not on(sessions, {"sessionId": ""})  # no seed: off, as without a sessionId
    region = _flag(
        api,
        {"name": "default", "constraints": [{"contextName": "region", "operator": "IN", "values": ["eu"]}]},
    )
    for context in (
        {"region": "us", "properties": {"region": "eu"}},
        {"properties": {"region": "eu"}, "region": "us"},
    ):
        assert on(region, context), context  # the property wins, wherever it comes in the body
    assert region in toggles(api, "/api/frontend?region=us&properties[region]=eu")
    assert region in toggles(api, "/api/frontend?properties[region]=eu&region=us")


def test_answers_are_the_python_sdks_on_the_client_api(
    server: ServerProcess, api: Api, tmp_path: Path
) -> None:
    # The oracle is the official Python SDK reading the server's client API, not flagproxy's engine. Some
    # flags exist for this test alone (a rollout, variants with a payload, a constraint) beside whatever
    # the session's other tests made; those that draw at random are left out.
    rollout, painted = unique("fr-rollout"), unique("fr-variants")
    for name in (rollout, painted):
        api.create_feature(name)
        api.switch(name, True)
    api.add_strategy(
        rollout, {"name": "flexibleRollout", "parameters": {"rollout": "40", "groupId": rollout}}
    )
    blue = {
        "name": "blue",
        "weight": 500,
        "weightType": "variable",
        "payload": {"type": "string", "value": "b"},
    }
    variants = [blue, {"name": "red", "weight": 500, "weightType": "variable"}]
    constraint = {"contextName": "region", "operator": "IN", "values": ["eu"]}
    api.add_strategy(painted, {"name": "default", "constraints": [constraint], "variants": variants})
    payload = api.client_features(CLIENT_TOKEN, spec="5.0.0")
    flags = [f["name"] for f in payload["features"] if not depends_on_randomness(f)]
    assert rollout in flags and painted in flags
    contexts = [
        {"userId": str(user), "sessionId": "s", "remoteAddress": "10.0.0.1", "properties": {"region": region}}
        for user in range(12)
        for region in ("eu", "us")
    ]
    expected = python_answers(
        f"{server.url}/api", CLIENT_TOKEN, flags, contexts, unique("frontend-oracle"), tmp_path
    )
    seen_on = set()
    for context, sdk in zip(contexts, expected, strict=True):
        query = f"userId={context['userId']}&sessionId=s&remoteAddress=10.0.0.1"
        got = toggles(api, f"/api/frontend/all?{query}&properties[region]={context['properties']['region']}")
        for flag in flags:
            enabled, variant = sdk[flag]
            shown = {k: v for k, v in got[flag]["variant"].items() if k in ("name", "enabled", "payload")}
            assert (got[flag]["enabled"], shown) == (enabled, variant), (flag, context)
            if enabled:
                seen_on.add(flag)
    assert {rollout, painted} <= seen_on  # the rollout and the constraint took some contexts, not none


def test_a_project_token_sees_its_projects(api: Api) -> None:
    project = unique("p")
    assert api.post("/api/admin/projects", {"id": project, "name": project}).status in (200, 201)
    inside, outside = unique("in"), unique("out")
    for name, where in ((inside, project), (outside, "default")):
        api.create_feature(name, where)
        api.add_strategy(name, {"name": "default", "constraints": [], "parameters": {}}, project=where)
        api.switch(name, True, project=where)
    created = api.post(
        "/api/admin/api-tokens",
        {"tokenName": unique("t"), "type": "frontend", "environment": "development", "projects": [project]},
    )
    secret = created.json()["secret"]
    seen = toggles(api, "/api/frontend/all", token=secret)
    assert inside in seen and outside not in seen


def test_refusals_and_bad_input(api: Api) -> None:
    assert_error(api.get("/api/frontend", token=None), 401, "AuthenticationRequired")
    assert_error(api.get("/api/frontend", token=CLIENT_TOKEN), 403, "NoAccessError")
    wrong_type = api.request(
        "POST", "/api/frontend", token=FRONTEND_TOKEN, body=b"x", headers={"Content-Type": "text/plain"}
    )
    assert wrong_type.status == 415
    bad_json = api.request(
        "POST",
        "/api/frontend",
        token=FRONTEND_TOKEN,
        body=b"{nope",
        headers={"Content-Type": "application/json"},
    )
    assert_error(bad_json, 400, "ValidationError", "body")
    assert_error(api.post("/api/frontend", {"context": {"userId": {"a": 1}}}, token=FRONTEND_TOKEN), 400,
                 "ValidationError", "context.userId")  # fmt: skip
    assert_error(api.get("/api/frontend?properties[a][b]=c", token=FRONTEND_TOKEN), 400, "ValidationError")
    assert_error(
        api.get("/api/frontend?userId=1&userId=2", token=FRONTEND_TOKEN), 400, "ValidationError", "userId"
    )


def test_metrics_and_register(api: Api) -> None:
    name = unique("fm")
    api.create_feature(name)
    app_name = unique("web")
    bucket = {"appName": app_name, "instanceId": "b-1",
              "bucket": {"start": "2026-01-01T00:00:00Z", "stop": "2026-01-01T00:01:00Z",
                         "toggles": {name: {"yes": 2, "no": 3}}}}  # fmt: skip
    answer = api.post("/api/frontend/client/metrics", bucket, token=FRONTEND_TOKEN)
    assert (answer.status, answer.body) == (202, b"")
    usage = api.get(f"/api/admin/client-metrics/features/{name}").json()["lastHourUsage"]
    assert [(u["environment"], u["appName"], u["yes"], u["no"]) for u in usage] == [
        ("development", app_name, 2, 3)
    ]
    register = {"appName": app_name, "instanceId": "b-1", "strategies": [], "interval": 15000,
                "started": "2026-01-01T00:00:00Z"}  # fmt: skip
    answer = api.post("/api/frontend/client/register", register, token=FRONTEND_TOKEN)
    assert (answer.status, answer.body) == (202, b"")
    assert_error(
        api.post("/api/frontend/client/metrics", {"appName": 1}, token=FRONTEND_TOKEN), 400, "ValidationError"
    )
