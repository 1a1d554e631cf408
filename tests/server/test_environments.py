"""Environments, including SPEC.md's global POST /api/admin/environments/:name/on and /off."""

from __future__ import annotations

from tests.server.harness import CLIENT_TOKEN, Api, unique


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
    assert (again.status, again.json()["name"]) == (409, "NameExistsError")
    bad = api.post("/api/admin/environments", {"name": "has space", "type": "test"})
    assert bad.status == 400 and '"name"' in bad.json()["message"]


def test_environment_on_and_off(api: Api) -> None:
    name = unique("env")
    api.post("/api/admin/environments", {"name": name, "type": "test", "enabled": False})
    on = api.post(f"/api/admin/environments/{name}/on")
    assert (on.status, on.body) == (204, b"")
    assert api.get(f"/api/admin/environments/{name}").json()["enabled"] is True
    assert api.post(f"/api/admin/environments/{name}/on").status == 204  # idempotent
    assert api.post(f"/api/admin/environments/{name}/off").status == 204
    assert api.get(f"/api/admin/environments/{name}").json()["enabled"] is False


def test_environment_on_errors(api: Api) -> None:
    missing = api.post("/api/admin/environments/nope/on")
    assert (missing.status, missing.json()["name"]) == (404, "NotFoundError")
    assert api.post("/api/admin/environments/development/on", token=None).status == 401
    # Permission is checked before existence, as in Unleash.
    for name in ("development", "nope"):
        refused = api.post(f"/api/admin/environments/{name}/off", token=CLIENT_TOKEN)
        assert (refused.status, refused.json()["name"]) == (403, "NoAccessError")
    assert api.post("/api/admin/environments/nope/off").status == 404


def test_projects(api: Api) -> None:
    projects = api.get("/api/admin/projects").json()["projects"]
    assert "default" in [p["id"] for p in projects]
    project = unique("proj")
    assert api.post("/api/admin/projects", {"id": project, "name": "P"}).status == 201
    assert api.post("/api/admin/projects", {"id": project, "name": "P"}).status == 409
    assert api.get(f"/api/admin/projects/{project}").json()["name"] == "P"
    assert api.get("/api/admin/projects/nope").status == 404
