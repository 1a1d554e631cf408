"""The data revision, and so the client API's ETag, moves only when what the client API serves changes.

One case per write route of the admin API, generated from the app's route table (a route added later
without a case fails `test_every_write_route_has_a_case`, naming it): the write is made, then made again
exactly as before. A write that changes what `/api/client/features` serves moves the ETag once; the same
write repeated (an identical PUT, switching on what is on, deleting what is gone) leaves it as it was,
as does every write that changes nothing served (users, tokens, projects, a segment no strategy uses, an
environment switched off, which is still served). Only creating another strategy moves it on repeat: that
is a second strategy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from flagproxy.server.app import admin_routes, create_app
from flagproxy.server.settings import ServerSettings
from tests.server.harness import CLIENT_TOKEN, Api, unique


@dataclass
class Write:
    method: str
    path: str
    body: Any = None
    moves: bool = False  # does the first write change what the client API serves?
    moves_again: bool = False  # does the same write, repeated, change it again?
    token: str | None = None  # another caller than the admin token (a user's own tokens)


FLAGS = "/api/admin/projects/default/features"


def new_flag(api: Api, *, on: bool = False, strategies: int = 1) -> tuple[str, list[str]]:
    """A flag of the default project with `strategies` default strategies in development."""
    name = unique("rev")
    api.create_feature(name)
    ids = [api.add_strategy(name, {"name": "default"})["id"] for _ in range(strategies)]
    if on:
        api.switch(name, True)
    return name, ids


def archived_flag(api: Api, project: str = "default") -> str:
    name = unique("rev-archived")
    api.create_feature(name, project)
    assert api.delete(f"/api/admin/projects/{project}/features/{name}").status == 202
    return name


def new_project(api: Api) -> str:
    project = unique("rev-p")
    assert api.post("/api/admin/projects", {"id": project, "name": project}).status == 201
    return project


def with_parent(api: Api) -> tuple[str, str]:
    child, _ = new_flag(api)
    parent, _ = new_flag(api)
    assert api.post(f"{FLAGS}/{child}/dependencies", {"feature": parent}).status == 200
    return child, parent


def used_segment(api: Api) -> int:
    segment = api.create_segment(
        unique("rev-seg"), [{"contextName": "userId", "operator": "IN", "values": ["a"]}]
    )
    name, _ = new_flag(api, strategies=0)
    api.add_strategy(name, {"name": "default", "segments": [segment["id"]]})
    return int(segment["id"])


def env_path(name: str) -> str:
    return f"{FLAGS}/{name}/environments/development"


STRATEGY = {
    "name": "flexibleRollout",
    "parameters": {"rollout": "40", "stickiness": "default", "groupId": "g"},
}
VARIANTS = [{"name": "blue", "weight": 1000, "weightType": "variable", "stickiness": "default"}]


def _token_write(api: Api) -> Write:
    return Write("POST", "/api/admin/api-tokens", {"tokenName": unique("t"), "type": "client"})


def _delete_token(api: Api) -> Write:
    secret = api.post("/api/admin/api-tokens", {"tokenName": unique("t"), "type": "client"}).json()["secret"]
    return Write("DELETE", f"/api/admin/api-tokens/{secret}")


def _environment(api: Api, switch: str) -> Write:
    name = unique("rev-env")
    assert api.post("/api/admin/environments", {"name": name, "type": "test"}).status == 201
    return Write("POST", f"/api/admin/environments/{name}/{switch}")


def _set_sort_order(api: Api) -> Write:
    name, _ = new_flag(api, strategies=0)
    first, second = (api.add_strategy(name, body)["id"] for body in ({"name": "default"}, STRATEGY))
    order = [{"id": first, "sortOrder": 2}, {"id": second, "sortOrder": 1}]
    return Write("POST", f"{env_path(name)}/strategies/set-sort-order", order, moves=True)


def _tagged(api: Api) -> Write:
    name, _ = new_flag(api)
    assert api.post(f"/api/admin/features/{name}/tags", {"type": "simple", "value": "kept"}).status in (
        200,
        201,
    )
    return Write("DELETE", f"/api/admin/features/{name}/tags/simple/kept", moves=True)


def _personal_token(api: Api, delete: bool) -> Write:
    _, token = api.user_with_token(3)
    as_user = Api(api.port, token)
    body = {"description": "rev", "expiresAt": "2099-01-01T00:00:00Z"}
    if not delete:
        return Write("POST", "/api/admin/user/tokens", body, token=token)
    made = as_user.post("/api/admin/user/tokens", body).json()
    return Write("DELETE", f"/api/admin/user/tokens/{made['id']}", token=token)


def _invite(api: Api) -> Write:
    made = api.post(
        "/api/admin/invite-link/tokens", {"name": unique("i"), "expiresAt": "2099-01-01T00:00:00Z"}
    )
    return Write("PUT", f"/api/admin/invite-link/tokens/{made.json()['secret']}", {"enabled": False})


def _role(api: Api) -> int:
    return int(api.post("/api/admin/roles", {"name": unique("r"), "type": "custom"}).json()["roles"]["id"])


def _group(api: Api) -> int:
    return int(api.post("/api/admin/groups", {"name": unique("g")}).json()["id"])


# route name -> the write, after whatever it needs was set up
CASES: dict[str, Callable[[Api], Write]] = {
    "api_tokens.create_token": _token_write,
    "api_tokens.delete_token": _delete_token,
    "projects.create_project": lambda api: Write(
        "POST", "/api/admin/projects", {"id": unique("p"), "name": "P"}
    ),
    "projects.update_project": lambda api: Write(
        "PUT", f"/api/admin/projects/{new_project(api)}", {"name": "N"}
    ),
    "projects.delete_project": lambda api: (
        (p := new_project(api), archived_flag(api, p)) and Write("DELETE", f"/api/admin/projects/{p}")
    ),
    # Every flag is served, off, in a new environment (to its tokens, and as delta events).
    "environments.create_environment": lambda api: (
        new_flag(api)
        and Write("POST", "/api/admin/environments", {"name": unique("e"), "type": "test"}, moves=True)
    ),
    "environments.environment_on": lambda api: _environment(api, "on"),
    "environments.environment_off": lambda api: _environment(api, "off"),  # still served, as in Unleash
    "segments.create_segment": lambda api: Write(
        "POST", "/api/admin/segments", {"name": unique("s"), "constraints": []}
    ),
    "segments.update_segment": lambda api: (
        (s := used_segment(api))
        and Write("PUT", f"/api/admin/segments/{s}", {"name": f"renamed-{s}", "constraints": []}, moves=True)
    ),
    "segments.delete_segment": lambda api: Write(
        "DELETE", f"/api/admin/segments/{api.create_segment(unique('s'), [])['id']}"
    ),
    "features.create_feature": lambda api: Write("POST", FLAGS, {"name": unique("rev-new")}, moves=True),
    "features.update_feature": lambda api: Write(
        "PUT", f"{FLAGS}/{new_flag(api)[0]}", {"description": "changed", "stale": True}, moves=True
    ),
    "features.archive_feature": lambda api: Write("DELETE", f"{FLAGS}/{new_flag(api)[0]}", moves=True),
    "features.put_variants": lambda api: Write(
        "PUT", f"{env_path(new_flag(api)[0])}/variants", VARIANTS, moves=True
    ),
    "features.put_variants_everywhere": lambda api: Write(
        "PUT", f"{FLAGS}/{new_flag(api)[0]}/variants", VARIANTS, moves=True
    ),
    "features.add_dependency": lambda api: Write(
        "POST", f"{FLAGS}/{new_flag(api)[0]}/dependencies", {"feature": new_flag(api)[0]}, moves=True
    ),
    "features.remove_dependency": lambda api: (
        (pair := with_parent(api))
        and Write("DELETE", f"{FLAGS}/{pair[0]}/dependencies/{pair[1]}", moves=True)
    ),
    "features.remove_dependencies": lambda api: Write(
        "DELETE", f"{FLAGS}/{with_parent(api)[0]}/dependencies", moves=True
    ),
    "features.feature_on": lambda api: Write("POST", f"{env_path(new_flag(api)[0])}/on", moves=True),
    "features.feature_off": lambda api: Write(
        "POST", f"{env_path(new_flag(api, on=True)[0])}/off", moves=True
    ),
    "features.delete_archived": lambda api: Write("DELETE", f"/api/admin/archive/{archived_flag(api)}"),
    "features.revive_feature": lambda api: Write(
        "POST", f"/api/admin/archive/revive/{archived_flag(api)}", moves=True
    ),
    "strategies.add_strategy": lambda api: Write(
        "POST", f"{env_path(new_flag(api)[0])}/strategies", STRATEGY, moves=True, moves_again=True
    ),
    "strategies.replace_strategy": lambda api: (
        (flag := new_flag(api))
        and Write("PUT", f"{env_path(flag[0])}/strategies/{flag[1][0]}", STRATEGY, moves=True)
    ),
    "strategies.delete_strategy": lambda api: (
        (flag := new_flag(api))
        and Write("DELETE", f"{env_path(flag[0])}/strategies/{flag[1][0]}", moves=True)
    ),
    "strategies.set_sort_order": _set_sort_order,
    "tags.add_tag": lambda api: Write(
        "POST", f"/api/admin/features/{new_flag(api)[0]}/tags", {"type": "simple", "value": "new"}, moves=True
    ),
    "tags.remove_tag": _tagged,
    "users.create_user": lambda api: Write(
        "POST", "/api/admin/user-admin", {"email": f"{unique('u')}@example.com"}
    ),
    "users.update_user": lambda api: Write(
        "PUT", f"/api/admin/user-admin/{api.create_user()['id']}", {"rootRole": 2}
    ),
    "users.delete_user": lambda api: Write("DELETE", f"/api/admin/user-admin/{api.create_user()['id']}"),
    "personal_tokens.create_token": lambda api: _personal_token(api, delete=False),
    "personal_tokens.delete_token": lambda api: _personal_token(api, delete=True),
    "invites.create_invite": lambda api: Write(
        "POST", "/api/admin/invite-link/tokens", {"name": unique("i"), "expiresAt": "2099-01-01T00:00:00Z"}
    ),
    "invites.update_invite": _invite,
    "roles.create_role": lambda api: Write(
        "POST", "/api/admin/roles", {"name": unique("r"), "type": "custom"}
    ),
    "roles.update_role": lambda api: Write(
        "PUT", f"/api/admin/roles/{_role(api)}", {"name": unique("r2"), "type": "custom"}
    ),
    "roles.delete_role": lambda api: Write("DELETE", f"/api/admin/roles/{_role(api)}"),
    "groups.create_group": lambda api: Write("POST", "/api/admin/groups", {"name": unique("g")}),
    "groups.update_group": lambda api: Write(
        "PUT", f"/api/admin/groups/{_group(api)}", {"name": unique("g2")}
    ),
    "groups.delete_group": lambda api: Write("DELETE", f"/api/admin/groups/{_group(api)}"),
    "access.set_access": lambda api: Write(
        "PUT",
        f"/api/admin/projects/{new_project(api)}/access",
        {"roles": [{"id": 5, "groups": [_group(api)]}]},
    ),
    "access.add_access": lambda api: Write(
        "POST", f"/api/admin/projects/{new_project(api)}/access", {"roles": [5], "groups": [_group(api)]}
    ),
    "playground.evaluate": lambda api: Write("POST", "/api/admin/playground", {"environment": "development"}),
}


def write_routes() -> list[str]:
    app = create_app(ServerSettings.load({}, {}), name=unique("revision").replace("-", "_"))
    return sorted({name for method, _, name in admin_routes(app) if method not in ("GET", "HEAD", "OPTIONS")})


WRITE_ROUTES = write_routes()


def test_every_write_route_has_a_case() -> None:
    assert len(WRITE_ROUTES) >= 40
    missing = sorted(set(WRITE_ROUTES) - set(CASES))
    assert not missing, f"write routes without a case here (does the write change what is served?): {missing}"
    assert not sorted(set(CASES) - set(WRITE_ROUTES)), "cases for routes the server no longer has"


def client_etag(api: Api) -> str:
    answer = api.get("/api/client/features", token=CLIENT_TOKEN)
    assert answer.status == 200
    return answer.headers["etag"]


@pytest.mark.parametrize("route", WRITE_ROUTES)
def test_the_etag_moves_only_when_what_is_served_changes(api: Api, route: str) -> None:
    if route not in CASES:
        pytest.fail(f"no case for {route}")
    write = CASES[route](api)
    caller = api if write.token is None else Api(api.port, write.token)
    before = client_etag(api)
    first = caller.request(write.method, write.path, write.body)
    assert first.status < 300, (route, first.status, first.body)
    after_first = client_etag(api)
    assert (after_first != before) == write.moves, (route, "first write", before, after_first)
    again = caller.request(write.method, write.path, write.body)
    assert again.status < 500, (route, again.status, again.body)
    after_again = client_etag(api)
    assert (after_again != after_first) == write.moves_again, (route, "repeated", after_first, after_again)
