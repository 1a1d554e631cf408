"""Renaming and deleting projects (`PUT`/`DELETE /api/admin/projects/:projectId`, with Unleash's rules) and
paging through the event log with Unleash's event search (`GET /api/admin/search/events`)."""

from __future__ import annotations

from tests.server.harness import Api, assert_error, unique


def new_project(api: Api, **fields: str) -> str:
    project = unique("settings")
    answer = api.post("/api/admin/projects", {"id": project, "name": project, **fields})
    assert answer.status == 201, answer.body
    return project


def test_a_project_is_renamed_and_its_description_kept_or_changed(api: Api) -> None:
    project = new_project(api, description="first words")
    answer = api.put(f"/api/admin/projects/{project}", {"name": "Checkout team"})
    assert answer.status == 200 and answer.body == b""
    shown = api.get(f"/api/admin/projects/{project}").json()
    assert (shown["name"], shown["description"]) == ("Checkout team", "first words")
    assert api.put(f"/api/admin/projects/{project}", {"name": "Checkout", "description": None}).status == 200
    shown = api.get(f"/api/admin/projects/{project}").json()
    assert (shown["name"], shown["description"]) == ("Checkout", None)
    updated = [e for e in api.get("/api/admin/events?limit=20").json()["events"] if e["project"] == project]
    assert updated[0]["type"] == "project-updated"
    assert updated[0]["data"]["preData"]["name"] == "Checkout team"
    assert updated[0]["data"]["data"]["name"] == "Checkout"


def test_renaming_refuses_bad_bodies_and_unknown_projects(api: Api) -> None:
    project = new_project(api)
    for body in ({}, {"name": ""}, {"name": 7}, {"name": "x", "description": 3}):
        assert_error(api.put(f"/api/admin/projects/{project}", body), 400, "ValidationError", context=body)
    json_type = {"Content-Type": "application/json"}
    broken = api.put(f"/api/admin/projects/{project}", body=b"{", headers=json_type)
    assert_error(broken, 400, "ValidationError")
    assert_error(api.put(f"/api/admin/projects/{unique('none')}", {"name": "x"}), 404, "NotFoundError")
    assert_error(api.delete(f"/api/admin/projects/{unique('none')}"), 404, "NotFoundError")


def test_the_default_project_and_one_with_flags_cannot_be_deleted(api: Api) -> None:
    record = assert_error(api.delete("/api/admin/projects/default"), 403, "InvalidOperationError")
    assert "default project" in record["message"]
    project = new_project(api)
    flag = unique("flag")
    api.create_feature(flag, project)
    record = assert_error(api.delete(f"/api/admin/projects/{project}"), 403, "InvalidOperationError")
    assert "active feature flags" in record["message"]
    assert api.get(f"/api/admin/projects/{project}").status == 200


def test_a_project_whose_flags_are_archived_is_deleted_with_them(api: Api) -> None:
    project = new_project(api)
    flag = unique("flag")
    api.create_feature(flag, project)
    assert api.delete(f"/api/admin/projects/{project}/features/{flag}").status == 202
    own = api.create_segment(unique("own"), [], project=project)
    everyone = api.create_segment(unique("shared"), [])
    answer = api.delete(f"/api/admin/projects/{project}")
    assert answer.status == 200 and answer.body == b""
    assert_error(api.get(f"/api/admin/projects/{project}"), 404, "NotFoundError")
    archived = [f["name"] for f in api.get("/api/admin/archive/features").json()["features"]]
    assert flag not in archived
    assert project not in [p["id"] for p in api.get("/api/admin/projects").json()["projects"]]
    segments = {s["id"] for s in api.get("/api/admin/segments").json()["segments"]}
    assert own["id"] not in segments and everyone["id"] in segments  # its own segments go with it
    # The name is free again, and the flag's name too.
    new = api.post("/api/admin/projects", {"id": project, "name": project})
    assert new.status == 201, new.body
    api.create_feature(flag, project)
    events = api.get("/api/admin/search/events?limit=50").json()["events"]
    assert any(e["type"] == "project-deleted" and e["project"] == project for e in events)


def test_a_project_owner_may_rename_and_delete_and_a_member_may_not(api: Api) -> None:
    owner, owner_token = api.user_with_token(2)  # an Editor creates the project and owns it
    project = unique("owned")
    as_owner = Api(api.port, owner_token)
    assert as_owner.post("/api/admin/projects", {"id": project, "name": project}).status == 201
    member, member_token = api.user_with_token(3)
    access = {"roles": [{"id": 4, "users": [owner["id"]]}, {"id": 5, "users": [member["id"]]}]}
    assert api.put(f"/api/admin/projects/{project}/access", access).status == 200
    as_member = Api(api.port, member_token)
    assert_error(as_member.put(f"/api/admin/projects/{project}", {"name": "x"}), 403, "NoAccessError")
    assert_error(as_member.delete(f"/api/admin/projects/{project}"), 403, "NoAccessError")
    assert as_owner.put(f"/api/admin/projects/{project}", {"name": "Renamed"}).status == 200
    assert as_owner.delete(f"/api/admin/projects/{project}").status == 200


def test_event_search_pages_through_the_whole_log(api: Api) -> None:
    for _ in range(5):
        new_project(api)  # five more events, whatever else the session has logged
    first = api.get("/api/admin/search/events?limit=2").json()
    assert set(first) == {"events", "total"} and len(first["events"]) == 2
    total = first["total"]
    assert total >= 5
    seen: list[int] = []
    offset = 0
    while offset < total:
        page = api.get(f"/api/admin/search/events?offset={offset}&limit=3").json()
        assert page["total"] == total
        seen += [event["id"] for event in page["events"]]
        offset += 3
    # Newest first, every event once (nothing else writes to this server's log meanwhile).
    assert seen == sorted(seen, reverse=True) and len(set(seen)) == len(seen) == total
    assert [e["id"] for e in first["events"]] == seen[:2]
    assert set(first["events"][0]) >= {"id", "type", "createdBy", "createdAt", "project", "data"}
    default = api.get("/api/admin/search/events").json()
    assert len(default["events"]) == min(50, default["total"])
    beyond = api.get(f"/api/admin/search/events?offset={total + 100}").json()
    assert beyond["events"] == [] and beyond["total"] == total


def test_event_search_refuses_bad_paging(api: Api) -> None:
    for query, field in (
        ("limit=-1", "limit"),
        ("limit=0", "limit"),
        ("limit=abc", "limit"),
        ("limit=1001", "limit"),
        ("offset=x", "offset"),
        ("offset=1.5", "offset"),
    ):
        answer = api.get(f"/api/admin/search/events?{query}")
        assert_error(answer, 400, "ValidationError", field, context=query)
    assert_error(api.get("/api/admin/search/events", token=None), 401, "AuthenticationRequired")
