"""Environments, including SPEC.md's global POST /api/admin/environments/:name/on and /off."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.server.harness import CLIENT_TOKEN, FRONTEND_TOKEN, Api, ServerProcess, assert_error, unique


def test_fresh_server_has_development_and_production(api: Api) -> None:
    names = [e["name"] for e in api.get("/api/admin/environments").json()["environments"]]
    assert names[:2] == ["development", "production"]


def test_create_environment_and_name_conflict(api: Api) -> None:
    name = unique("staging")
    answer = api.post("/api/admin/environments", {"name": name, "type": "test", "sortOrder": 5})
    assert answer.status == 201
    assert answer.json() | {} == {
        "name": name,
        "type": "test",
        "sortOrder": 5,
        "enabled": True,
        "protected": False,
        "requiredApprovals": None,
    }
    again = api.post("/api/admin/environments", {"name": name, "type": "test"})
    assert_error(again, 409, "NameExistsError")
    bad = api.post("/api/admin/environments", {"name": "has space", "type": "test"})
    assert_error(bad, 400, "ValidationError", "name")
    assert api.get(f"/api/admin/environments/{name}").json()["sortOrder"] == 5
    assert_error(api.get(f"/api/admin/environments/{unique('nope')}"), 404, "NotFoundError")


def test_environment_on_and_off(api: Api) -> None:
    name = unique("env")
    api.post("/api/admin/environments", {"name": name, "type": "test", "enabled": False})
    for switch, enabled in (("on", True), ("on", True), ("off", False), ("off", False)):  # idempotent
        answer = api.post(f"/api/admin/environments/{name}/{switch}")
        assert (answer.status, answer.body) == (204, b"")
        assert api.get(f"/api/admin/environments/{name}").json()["enabled"] is enabled
        listed = {e["name"]: e for e in api.get("/api/admin/environments").json()["environments"]}
        assert listed[name]["enabled"] is enabled


def test_environment_on_and_off_errors(api: Api) -> None:
    for switch in ("on", "off"):
        missing = api.post(f"/api/admin/environments/{unique('nope')}/{switch}")
        assert_error(missing, 404, "NotFoundError")
        for token in (None, "nope"):
            refused = api.post(f"/api/admin/environments/development/{switch}", token=token)
            assert_error(refused, 401, "AuthenticationRequired")
        # Permission is checked before existence, as in Unleash.
        for name in ("development", unique("nope")):
            for token in (CLIENT_TOKEN, FRONTEND_TOKEN):
                refused = api.post(f"/api/admin/environments/{name}/{switch}", token=token)
                assert_error(refused, 403, "NoAccessError")
    assert api.get("/api/admin/environments/development").json()["enabled"] is True


def test_environment_on_and_off_answer_only_the_statuses_spec_lists(server: ServerProcess) -> None:
    api = server.api()
    name = unique("env")
    api.post("/api/admin/environments", {"name": name, "type": "test"})

    @settings(max_examples=40, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(
        target=st.sampled_from([name, "nope", "a%00b", "%C2%B2", "x" * 300]),
        switch=st.sampled_from(["on", "off"]),
        token=st.sampled_from([api.token, api.token, None, "nope", CLIENT_TOKEN]),
        body=st.sampled_from([None, b"", b"{", b'{"enabled": false}', b"\x00"]),
        content_type=st.sampled_from([None, "application/json", "text/plain"]),
    )
    def check(
        target: str, switch: str, token: str | None, body: bytes | None, content_type: str | None
    ) -> None:
        headers = {"Content-Type": content_type} if content_type else {}
        answer = api.post(
            f"/api/admin/environments/{target}/{switch}", body=body, token=token, headers=headers
        )
        assert answer.status in {204, 401, 403, 404}, (target, switch, token, body, answer.body)
        if answer.status == 204:
            assert answer.body == b""
        else:
            assert {"id", "name", "message"} <= set(answer.json())

    check()


def test_a_globally_disabled_environment_is_still_served(api: Api) -> None:
    # Unleash 8.2's behaviour (admin-api.md F12), documented in docs/server.md: the switch records the
    # administrator's choice; it does not hide flags from SDKs.
    name = unique("env")
    api.post("/api/admin/environments", {"name": name, "type": "test"})
    token = api.post(
        "/api/admin/api-tokens", {"tokenName": unique("t"), "type": "client", "environment": name}
    )
    feature = unique("served")
    api.create_feature(feature)
    api.switch(feature, True, name)
    assert api.post(f"/api/admin/environments/{name}/off").status == 204
    listed = {e["name"]: e for e in api.listed_feature(feature)["environments"]}
    assert listed[name]["enabled"] is True
    served = api.client_features(token.json()["secret"], f"?namePrefix={feature}")["features"]
    assert [(f["name"], f["enabled"]) for f in served] == [(feature, True)]


def test_projects(api: Api) -> None:
    projects = api.get("/api/admin/projects").json()["projects"]
    assert "default" in [p["id"] for p in projects]
    project = unique("proj")
    assert api.post("/api/admin/projects", {"id": project, "name": "P"}).status == 201
    assert_error(api.post("/api/admin/projects", {"id": project, "name": "P"}), 409, "NameExistsError")
    assert_error(
        api.post("/api/admin/projects", {"id": "has space", "name": "P"}), 400, "ValidationError", "id"
    )
    assert api.get(f"/api/admin/projects/{project}").json()["name"] == "P"
    assert project in [p["id"] for p in api.get("/api/admin/projects").json()["projects"]]
    assert_error(api.get(f"/api/admin/projects/{unique('nope')}"), 404, "NotFoundError")
