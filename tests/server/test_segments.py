"""Segments, including SPEC.md's PUT /api/admin/segments/:id (omitted fields stay unchanged; 204, 400,
401, 403, 409, 415)."""

from __future__ import annotations

from tests.server.harness import CLIENT_TOKEN, Api, unique

IN_USERS = [{"contextName": "userId", "operator": "IN", "values": ["u1", "u2"]}]


def test_create_list_and_read(api: Api) -> None:
    name = unique("beta")
    created = api.create_segment(name, IN_USERS, description="beta testers")
    assert created["name"] == name and created["description"] == "beta testers"
    assert created["constraints"] == [
        {"contextName": "userId", "operator": "IN", "values": ["u1", "u2"], "inverted": False,
         "caseInsensitive": False}
    ]  # fmt: skip
    assert api.get(f"/api/admin/segments/{created['id']}").json() == created
    listed = next(s for s in api.get("/api/admin/segments").json()["segments"] if s["id"] == created["id"])
    assert listed["usedInFeatures"] == 0 and listed["usedInProjects"] == 0
    duplicate = api.post("/api/admin/segments", {"name": name, "constraints": []})
    assert (duplicate.status, duplicate.json()["name"]) == (409, "NameExistsError")
    missing = api.post("/api/admin/segments", {"name": unique("s")})
    assert missing.status == 400 and '"constraints"' in missing.json()["message"]


def test_update_keeps_omitted_fields(api: Api) -> None:
    created = api.create_segment(unique("keep"), IN_USERS, description="kept")
    path = f"/api/admin/segments/{created['id']}"
    renamed = unique("renamed")
    answer = api.put(path, {"name": renamed})
    assert (answer.status, answer.body) == (204, b"")
    after = api.get(path).json()
    assert after["name"] == renamed
    assert after["description"] == "kept" and after["constraints"] == created["constraints"]
    assert api.put(path, {"constraints": [], "description": None}).status == 204
    after = api.get(path).json()
    assert after["name"] == renamed and after["constraints"] == [] and after["description"] is None
    assert api.put(path, {"project": "default"}).status == 204
    assert api.get(path).json()["project"] == "default"
    assert api.put(path, {}).status == 204
    assert api.get(path).json()["project"] == "default"


def test_update_statuses(api: Api) -> None:
    first = api.create_segment(unique("one"), IN_USERS)
    second = api.create_segment(unique("two"), IN_USERS)
    path = f"/api/admin/segments/{second['id']}"
    conflict = api.put(path, {"name": first["name"]})
    assert (conflict.status, conflict.json()["name"]) == (409, "NameExistsError")
    assert api.put(path, {"name": second["name"]}).status == 204  # its own name is fine
    bad = api.put(path, {"constraints": [{"contextName": "userId", "operator": "LIKE", "values": []}]})
    assert (bad.status, bad.json()["name"]) == (400, "ValidationError")
    assert "constraints[0].operator" in bad.json()["message"]
    empty_name = api.put(path, {"name": ""})
    assert empty_name.status == 400 and '"name"' in empty_name.json()["message"]
    null_constraints = api.put(path, {"constraints": None})
    assert null_constraints.status == 400 and '"constraints"' in null_constraints.json()["message"]
    no_project = api.put(path, {"project": "nope"})
    assert no_project.status == 400 and '"project"' in no_project.json()["message"]
    malformed = api.put(path, body=b"{not json", headers={"Content-Type": "application/json"})
    assert (malformed.status, malformed.json()["name"]) == (400, "ValidationError")
    for headers in ({"Content-Type": "text/plain"}, {}):
        wrong_type = api.put(path, body=b'{"name": "x"}', headers=headers)
        assert (wrong_type.status, wrong_type.json()["name"]) == (415, "ContentTypeerror")
    assert api.put(path, {"name": "x"}, token=None).json()["name"] == "AuthenticationRequired"
    refused = api.put(path, {"name": "x"}, token=CLIENT_TOKEN)
    assert (refused.status, refused.json()["name"]) == (403, "NoAccessError")
    for unknown in ("99999999", "abc"):
        missing = api.put(f"/api/admin/segments/{unknown}", {"name": unique("x")})
        assert (missing.status, missing.json()["name"]) == (404, "NotFoundError")
    # Check order as in Unleash: 401 before 403 before 415 before 400.
    assert api.put("/api/admin/segments/abc", body=b"x", token=CLIENT_TOKEN).status == 403
    assert api.put(path, body=b"{", headers={"Content-Type": "text/plain"}).status == 415


def test_segment_used_by_a_strategy(api: Api) -> None:
    segment = api.create_segment(unique("used"), IN_USERS)
    feature = unique("segmented")
    api.create_feature(feature)
    api.add_strategy(feature, {"name": "default", "segments": [segment["id"]]})
    listed = next(s for s in api.get("/api/admin/segments").json()["segments"] if s["id"] == segment["id"])
    assert listed["usedInFeatures"] == 1 and listed["usedInProjects"] == 1
    project = unique("other")
    api.post("/api/admin/projects", {"id": project, "name": "Other"})
    moved = api.put(f"/api/admin/segments/{segment['id']}", {"project": project})
    assert moved.status == 400 and '"project"' in moved.json()["message"]
    in_use = api.delete(f"/api/admin/segments/{segment['id']}")
    assert (in_use.status, in_use.json()["name"]) == (409, "NameExistsError")


def test_delete(api: Api) -> None:
    segment = api.create_segment(unique("gone"), IN_USERS)
    assert api.delete(f"/api/admin/segments/{segment['id']}").status == 200
    assert api.get(f"/api/admin/segments/{segment['id']}").status == 404
