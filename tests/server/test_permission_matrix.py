"""Every admin route against every kind of caller, generated from the app's own route table: a route added
later without a permission fails here (and create_app refuses to start without one).

Callers: no credential, an unknown one, a client token, a frontend token, and users through personal
access tokens: Viewer, Editor, Admin, a custom root role, a project Member in and outside its project, a
member through a group, and a user whose access was replaced away. Each call only has to get past
authentication and the permission check or not: 401/403 means refused, anything else means let through
(a 400 or 404 after the check is the route's own answer).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from flagproxy.server.app import admin_routes, create_app
from flagproxy.server.identity.permissions import BUILT_IN, READ_NEEDS, ROUTE_NEEDS, Need
from flagproxy.server.settings import ServerSettings
from tests.server.harness import CLIENT_TOKEN, FRONTEND_TOKEN, Api, unique

SEGMENT_PERMISSIONS = {"CREATE_SEGMENT", "UPDATE_SEGMENT"}


def route_table() -> list[tuple[str, str, str]]:
    app = create_app(ServerSettings.load({}, {}), name=unique("matrix").replace("-", "_"))
    return [(m, p, n) for m, p, n in admin_routes(app) if m not in ("HEAD", "OPTIONS")]


def need_of(method: str, name: str) -> Need | None:
    if method == "GET":
        return READ_NEEDS.get(name)
    return ROUTE_NEEDS[name]


class World:
    """Projects, people and resources the calls point at; fresh ones where a call could consume them."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.project = unique("matrix-p")
        self.other = unique("matrix-q")
        for project in (self.project, self.other):
            assert api.post("/api/admin/projects", {"id": project, "name": project}).status == 201
        self.segment = api.create_segment(unique("seg"), [])["id"]

    def fresh_feature(self, project: str) -> tuple[str, str]:
        name = unique("f")
        self.api.create_feature(name, project)
        strategy = self.api.add_strategy(name, {"name": "default"}, project=project)
        return name, strategy["id"]

    def fill(self, template: str, project: str) -> str:
        values: dict[str, Any] = {
            "project_id": project,
            "environment": "development",
            "segment_id": self.segment,
        }
        if "<name:" in template or "<strategy_id:" in template:
            values["name"], values["strategy_id"] = self.fresh_feature(project)
        if "<user_id:" in template:
            values["user_id"] = self.api.create_user()["id"]
        if "<role_id:" in template:
            answer = self.api.post("/api/admin/roles", {"name": unique("r"), "type": "custom"})
            values["role_id"] = answer.json()["roles"]["id"]
        if "<group_id:" in template:
            values["group_id"] = self.api.post("/api/admin/groups", {"name": unique("g")}).json()["id"]

        def value(match: re.Match[str]) -> str:
            return str(values.get(match.group(1), unique("x")))

        return re.sub(r"<(\w+):[^>]+>", value, template)


def people(api: Api, world: World) -> dict[str, dict[str, Any]]:
    """Each caller: its Authorization, and what it holds (None: refused before any permission check)."""
    callers: dict[str, dict[str, Any]] = {
        "no credential": {"token": None, "status": 401},
        "unknown credential": {"token": "user:" + "0" * 56, "status": 401},
        "client token": {"token": CLIENT_TOKEN, "status": 403},
        "frontend token": {"token": FRONTEND_TOKEN, "status": 403},
    }
    for role_id, label in ((1, "Admin"), (2, "Editor"), (3, "Viewer")):
        callers[label] = {
            "token": api.user_with_token(role_id)[1],
            "root": set(BUILT_IN[role_id].permissions),
        }
    custom = api.post(
        "/api/admin/roles",
        {
            "name": unique("segment-keeper"),
            "type": "root-custom",
            "permissions": [{"name": p} for p in SEGMENT_PERMISSIONS],
        },
    )
    assert custom.status == 200, custom.body
    callers["custom root role"] = {
        "token": api.user_with_token(custom.json()["roles"]["id"])[1],
        "root": SEGMENT_PERMISSIONS,
    }
    member_set = set(BUILT_IN[5].permissions)
    member, member_token = api.user_with_token(3)
    outsider, outsider_token = api.user_with_token(3)
    grouped, grouped_token = api.user_with_token(3)
    replaced, replaced_token = api.user_with_token(3)
    group = api.post(
        "/api/admin/groups", {"name": unique("g"), "users": [{"user": {"id": grouped["id"]}}]}
    ).json()
    assign = {"roles": [{"id": 5, "users": [member["id"], replaced["id"]], "groups": [group["id"]]}]}
    assert api.put(f"/api/admin/projects/{world.project}/access", assign).status == 200
    assert (
        api.put(
            f"/api/admin/projects/{world.other}/access", {"roles": [{"id": 5, "users": [outsider["id"]]}]}
        ).status
        == 200
    )
    # Replace the project's configuration without the last user: their access is gone.
    assign["roles"][0]["users"] = [member["id"]]
    assert api.put(f"/api/admin/projects/{world.project}/access", assign).status == 200
    callers["Member in its project"] = {"token": member_token, "root": set(), "project": member_set}
    callers["Member of another project"] = {"token": outsider_token, "root": set(), "project": set()}
    callers["Member through a group"] = {"token": grouped_token, "root": set(), "project": member_set}
    callers["access replaced away"] = {"token": replaced_token, "root": set(), "project": set()}
    return callers


def expected_refusal(caller: dict[str, Any], method: str, name: str) -> int | None:
    """401/403 when the caller must be refused, None when it must be let through."""
    if "status" in caller:
        return int(caller["status"])
    need = need_of(method, name)
    if need is None or need.permission is None:
        return None
    root: set[str] = caller["root"]
    if "ADMIN" in root or need.permission in root:
        return None
    if need.project and need.permission in caller.get("project", set()):
        return None
    return 403


def test_every_admin_route_checks_every_kind_of_caller(api: Api) -> None:
    world = World(api)
    callers = people(api, world)
    routes = route_table()
    assert len(routes) >= 60 and all(name in ROUTE_NEEDS for m, _, name in routes if m != "GET")
    problems = []
    for method, template, name in routes:
        for label, caller in callers.items():
            path = world.fill(template, world.project)
            answer = api.request(
                method, path, {} if method in ("POST", "PUT") else None, token=caller["token"]
            )
            refused = answer.status if answer.status in (401, 403) else None
            wanted = expected_refusal(caller, method, name)
            if refused != wanted:
                problems.append((label, method, template, answer.status, wanted, answer.body[:120]))
    assert problems == [], problems[:10]


def test_docs_list_every_admin_route_with_what_it_needs() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "server.md").read_text()
    for method, template, _ in route_table():
        path = re.sub(r"<(\w+):[^>]+>", r":\1", template)
        assert f"| {method} | `{path}` |" in docs, (method, path)
