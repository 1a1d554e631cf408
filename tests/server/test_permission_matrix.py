"""Every admin route against every kind of caller, with the expected answers written down here by hand from
Unleash's permission rules (not read from the server's own tables); the app's route table is read only to
prove every route has a row (a route added later without one fails here, naming it; create_app also refuses
to start without a permission for it).

Callers: no credential, an unknown one, a client token, a frontend token, and users through personal
access tokens: Viewer, Editor, Admin, a custom root role, a project Member in and outside its project, a
member through a group, and a user whose access was replaced away. Each call only has to get past
authentication and the permission check or not: 401/403 means refused, anything else means let through
(a 400 or 404 after the check is the route's own answer, and so is a 403 InvalidOperationError: a rule
that holds for every caller, such as a project that still holds flags not being deleted).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from flagproxy.server.app import admin_routes, create_app
from flagproxy.server.settings import ServerSettings
from tests.server.harness import CLIENT_TOKEN, FRONTEND_TOKEN, Api, unique

SEGMENT_PERMISSIONS = {"CREATE_SEGMENT", "UPDATE_SEGMENT"}

# The users of the matrix, by letter. Every one of them holds a root role; the project ones are Viewers
# given Unleash's built-in project role Member (5) in the matrix's project.
USERS = {
    "A": "Admin",
    "E": "Editor",
    "V": "Viewer",
    "C": "custom root role",  # root-custom with CREATE_SEGMENT and UPDATE_SEGMENT only
    "M": "Member in its project",  # through the project's access, directly
    "G": "Member through a group",  # through a group the project's access names
    "O": "Member of another project",
    "R": "access replaced away",  # was a Member until the access was replaced without them
}
# Who is let through, following Unleash (src/lib/types/permissions.ts and its OSS roles): ADMIN holds every
# permission; the Editor root role holds the root permissions but user, role, group, invite and environment
# management, and the project Member's flag permissions in every project; the Viewer reads; Member holds
# CREATE/UPDATE/DELETE_FEATURE, UPDATE_FEATURE_VARIANTS, UPDATE_FEATURE_DEPENDENCY and the environment ones
# (strategies, on/off, environment variants) in its project, not PROJECT_USER_ACCESS_WRITE (the Owner's).
EVERYONE = "AEVCMGOR"  # any signed-in user: reads, the playground, a user's own tokens
ADMIN_ONLY = "A"
ROOT_EDITOR = "AE"  # a root permission the Editor holds and the custom role does not
FLAG_WORK = "AEMG"  # a flag permission in the matrix's project (a route's or its flag's project)
SEGMENT_WRITE = "AEC"  # CREATE_SEGMENT / UPDATE_SEGMENT: the custom root role too

FEATURE = "/api/admin/projects/:project_id/features/:name"
IN_ENVIRONMENT = FEATURE + "/environments/:environment"
ALLOWED: dict[tuple[str, str], str] = {
    # users, invite links, roles, groups: Admin only (Unleash: ADMIN)
    ("POST", "/api/admin/user-admin"): ADMIN_ONLY,
    ("GET", "/api/admin/user-admin"): EVERYONE,
    ("GET", "/api/admin/user-admin/:user_id"): EVERYONE,
    ("PUT", "/api/admin/user-admin/:user_id"): ADMIN_ONLY,
    ("DELETE", "/api/admin/user-admin/:user_id"): ADMIN_ONLY,
    ("GET", "/api/admin/user"): EVERYONE,
    ("POST", "/api/admin/user/tokens"): EVERYONE,
    ("GET", "/api/admin/user/tokens"): EVERYONE,
    ("DELETE", "/api/admin/user/tokens/:token_id"): EVERYONE,
    ("POST", "/api/admin/invite-link/tokens"): ADMIN_ONLY,
    ("GET", "/api/admin/invite-link/tokens"): EVERYONE,
    ("GET", "/api/admin/invite-link/tokens/:secret"): EVERYONE,
    ("PUT", "/api/admin/invite-link/tokens/:secret"): ADMIN_ONLY,
    ("POST", "/api/admin/roles"): ADMIN_ONLY,
    ("GET", "/api/admin/roles"): EVERYONE,
    ("GET", "/api/admin/roles/permissions"): EVERYONE,
    ("GET", "/api/admin/roles/:role_id"): EVERYONE,
    ("PUT", "/api/admin/roles/:role_id"): ADMIN_ONLY,
    ("DELETE", "/api/admin/roles/:role_id"): ADMIN_ONLY,
    ("POST", "/api/admin/groups"): ADMIN_ONLY,
    ("GET", "/api/admin/groups"): EVERYONE,
    ("GET", "/api/admin/groups/:group_id"): EVERYONE,
    ("PUT", "/api/admin/groups/:group_id"): ADMIN_ONLY,
    ("DELETE", "/api/admin/groups/:group_id"): ADMIN_ONLY,
    ("GET", "/api/admin/events"): EVERYONE,
    ("GET", "/api/admin/search/events"): EVERYONE,
    ("POST", "/api/admin/playground"): EVERYONE,  # evaluates, changes nothing
    # API tokens: READ/CREATE/DELETE_CLIENT_API_TOKEN; the list shows secrets, so not a Viewer's
    ("GET", "/api/admin/api-tokens"): ROOT_EDITOR,
    ("POST", "/api/admin/api-tokens"): ROOT_EDITOR,
    ("DELETE", "/api/admin/api-tokens/:secret"): ROOT_EDITOR,
    # environments: Admin only
    ("GET", "/api/admin/environments"): EVERYONE,
    ("POST", "/api/admin/environments"): ADMIN_ONLY,
    ("GET", "/api/admin/environments/:name"): EVERYONE,
    ("POST", "/api/admin/environments/:name/on"): ADMIN_ONLY,
    ("POST", "/api/admin/environments/:name/off"): ADMIN_ONLY,
    # segments: CREATE/UPDATE/DELETE_SEGMENT
    ("GET", "/api/admin/segments"): EVERYONE,
    ("POST", "/api/admin/segments"): SEGMENT_WRITE,
    ("GET", "/api/admin/segments/:segment_id"): EVERYONE,
    ("PUT", "/api/admin/segments/:segment_id"): SEGMENT_WRITE,
    ("DELETE", "/api/admin/segments/:segment_id"): ROOT_EDITOR,
    ("GET", "/api/admin/metrics/applications"): EVERYONE,
    ("GET", "/api/admin/client-metrics/features/:name"): EVERYONE,
    # projects: CREATE_PROJECT; access: PROJECT_USER_ACCESS_WRITE, which no caller here holds in the project
    ("GET", "/api/admin/projects"): EVERYONE,
    ("POST", "/api/admin/projects"): ROOT_EDITOR,
    ("GET", "/api/admin/projects/:project_id"): EVERYONE,
    # UPDATE_PROJECT / DELETE_PROJECT: the project's Owner's (and ADMIN); an Editor owns only what it created
    ("PUT", "/api/admin/projects/:project_id"): ADMIN_ONLY,
    ("DELETE", "/api/admin/projects/:project_id"): ADMIN_ONLY,
    ("GET", "/api/admin/projects/:project_id/access"): EVERYONE,
    ("PUT", "/api/admin/projects/:project_id/access"): ADMIN_ONLY,
    ("POST", "/api/admin/projects/:project_id/access"): ADMIN_ONLY,
    # flags: CREATE/UPDATE/DELETE_FEATURE, UPDATE_FEATURE_VARIANTS, UPDATE_FEATURE_DEPENDENCY in the project
    ("GET", "/api/admin/projects/:project_id/features"): EVERYONE,
    ("POST", "/api/admin/projects/:project_id/features"): FLAG_WORK,
    ("GET", FEATURE): EVERYONE,
    ("PUT", FEATURE): FLAG_WORK,
    ("DELETE", FEATURE): FLAG_WORK,
    ("PUT", FEATURE + "/variants"): FLAG_WORK,
    ("POST", FEATURE + "/dependencies"): FLAG_WORK,
    ("DELETE", FEATURE + "/dependencies"): FLAG_WORK,
    ("DELETE", FEATURE + "/dependencies/:parent"): FLAG_WORK,
    ("GET", "/api/admin/archive/features"): EVERYONE,
    ("POST", "/api/admin/archive/revive/:name"): FLAG_WORK,  # UPDATE_FEATURE in the flag's project
    ("DELETE", "/api/admin/archive/:name"): FLAG_WORK,  # DELETE_FEATURE in the flag's project
    ("GET", "/api/admin/features/:name/tags"): EVERYONE,
    ("POST", "/api/admin/features/:name/tags"): FLAG_WORK,  # UPDATE_FEATURE in the flag's project
    ("DELETE", "/api/admin/features/:name/tags/:tag_type/:value"): FLAG_WORK,
    # in an environment: UPDATE_FEATURE_ENVIRONMENT(_VARIANTS), CREATE/UPDATE/DELETE_FEATURE_STRATEGY
    ("GET", IN_ENVIRONMENT): EVERYONE,
    ("POST", IN_ENVIRONMENT + "/on"): FLAG_WORK,
    ("POST", IN_ENVIRONMENT + "/off"): FLAG_WORK,
    ("GET", IN_ENVIRONMENT + "/variants"): EVERYONE,
    ("PUT", IN_ENVIRONMENT + "/variants"): FLAG_WORK,
    ("GET", IN_ENVIRONMENT + "/strategies"): EVERYONE,
    ("POST", IN_ENVIRONMENT + "/strategies"): FLAG_WORK,
    ("GET", IN_ENVIRONMENT + "/strategies/:strategy_id"): EVERYONE,
    ("PUT", IN_ENVIRONMENT + "/strategies/:strategy_id"): FLAG_WORK,
    ("DELETE", IN_ENVIRONMENT + "/strategies/:strategy_id"): FLAG_WORK,
    ("POST", IN_ENVIRONMENT + "/strategies/set-sort-order"): FLAG_WORK,
}


def path_of(template: str) -> str:
    """A Sanic route template in the table's form: `<project_id:str>` → `:project_id`."""
    return re.sub(r"<(\w+):[^>]+>", r":\1", template)


def route_table() -> list[tuple[str, str, str]]:
    app = create_app(ServerSettings.load({}, {}), name=unique("matrix").replace("-", "_"))
    return [(m, p, n) for m, p, n in admin_routes(app) if m not in ("HEAD", "OPTIONS")]


def allowed(user: str, method: str, template: str) -> bool:
    """Whether the user (a letter of USERS) may call the route (a Sanic template), by the table above."""
    return user in ALLOWED[(method, path_of(template))]


class World:
    """Projects, people and resources the calls point at; fresh ones where a call could consume them."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.project = unique("matrix-p")
        self.other = unique("matrix-q")
        for project in (self.project, self.other):
            assert api.post("/api/admin/projects", {"id": project, "name": project}).status == 201
            # With a flag in it, DELETE /api/admin/projects/:id is refused by its rule, for everyone.
            api.create_feature(unique("keeps"), project)
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
    """Each caller: its Authorization, and either the status it always gets (refused before any permission
    check) or its letter in USERS."""
    callers: dict[str, dict[str, Any]] = {
        "no credential": {"token": None, "status": 401},
        "unknown credential": {"token": "user:" + "0" * 56, "status": 401},
        "client token": {"token": CLIENT_TOKEN, "status": 403},
        "frontend token": {"token": FRONTEND_TOKEN, "status": 403},
    }
    for role_id, letter in ((1, "A"), (2, "E"), (3, "V")):
        callers[USERS[letter]] = {"token": api.user_with_token(role_id)[1], "user": letter}
    custom = api.post(
        "/api/admin/roles",
        {
            "name": unique("segment-keeper"),
            "type": "root-custom",
            "permissions": [{"name": p} for p in SEGMENT_PERMISSIONS],
        },
    )
    assert custom.status == 200, custom.body
    callers[USERS["C"]] = {"token": api.user_with_token(custom.json()["roles"]["id"])[1], "user": "C"}
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
    for letter, token in (
        ("M", member_token),
        ("O", outsider_token),
        ("G", grouped_token),
        ("R", replaced_token),
    ):
        callers[USERS[letter]] = {"token": token, "user": letter}
    return callers


def expected_refusal(caller: dict[str, Any], method: str, template: str) -> int | None:
    """401/403 when the caller must be refused, None when it must be let through."""
    if "status" in caller:
        return int(caller["status"])
    return None if allowed(caller["user"], method, template) else 403


def test_the_table_has_a_row_for_every_admin_route_and_no_other() -> None:
    routes = {(method, path_of(template)) for method, template, _ in route_table()}
    assert len(routes) >= 60
    missing = sorted(routes - set(ALLOWED))
    assert not missing, f"admin routes with no row in ALLOWED (who may call them?): {missing}"
    stale = sorted(set(ALLOWED) - routes)
    assert not stale, f"rows in ALLOWED for routes the server no longer has: {stale}"


def test_every_admin_route_checks_every_kind_of_caller(api: Api) -> None:
    world = World(api)
    callers = people(api, world)
    problems = []
    for method, template, _ in route_table():
        for label, caller in callers.items():
            path = world.fill(template, world.project)
            answer = api.request(
                method, path, {} if method in ("POST", "PUT") else None, token=caller["token"]
            )
            refused = answer.status if answer.status in (401, 403) else None
            if refused == 403 and answer.error_name == "InvalidOperationError":
                refused = None  # past the permission check: the route's own rule refused
            wanted = expected_refusal(caller, method, template)
            if refused != wanted:
                problems.append((label, method, template, answer.status, wanted, answer.body[:120]))
    assert problems == [], problems[:10]


def test_docs_list_every_admin_route_with_what_it_needs() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "server.md").read_text()
    for method, template, _ in route_table():
        path = path_of(template)
        assert f"| {method} | `{path}` |" in docs, (method, path)
