"""People on the flag server, through a real server on SQLite and PostgreSQL: users, sign-in, sessions and
CSRF, personal access tokens, invite links and signup, roles, groups, project access, the event log, and
no secret in any answer, event or log line."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.server.harness import PASSWORD, Api, ServerProcess, assert_error, unique

USER_FIELDS = {
    "id", "isAPI", "name", "email", "username", "imageUrl", "inviteLink", "loginAttempts", "emailSent",
    "rootRole", "seenAt", "createdAt", "accountType", "permissions", "scimId",
}  # fmt: skip


def soon(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_users_are_created_read_updated_and_deleted(api: Api) -> None:
    email = f"{unique('Ann')}@Example.com"
    user = api.create_user(2, email=email, name="Ann", username=unique("ann"))
    assert set(user) == USER_FIELDS and user["rootRole"] == 2 and user["email"] == email
    assert "password" not in str(user).lower() or "password" not in user
    assert api.get(f"/api/admin/user-admin/{user['id']}").json()["email"] == email
    assert any(u["id"] == user["id"] for u in api.get("/api/admin/user-admin").json()["users"])
    updated = api.put(f"/api/admin/user-admin/{user['id']}", {"rootRole": 3, "name": "Ann B"})
    assert updated.status == 200 and updated.json()["rootRole"] == 3 and updated.json()["name"] == "Ann B"
    clash = api.post("/api/admin/user-admin", {"email": email.upper(), "rootRole": 3})
    assert_error(clash, 409, "NameExistsError")
    assert_error(
        api.post("/api/admin/user-admin", {"email": f"{unique('x')}@e.com", "rootRole": 4}),
        400,
        "ValidationError",
        "rootRole",
    )
    assert api.delete(f"/api/admin/user-admin/{user['id']}").status == 200
    assert_error(api.get(f"/api/admin/user-admin/{user['id']}"), 404, "NotFoundError")


def test_a_weak_password_is_refused_naming_the_rule(api: Api) -> None:
    for weak, rule in (("", "at least 10"), ("short1!A", "at least 10"), ("alllowercase1!", "uppercase"),
                       ("NoDigitsHere!!", "digit"), ("NoSpecials123", "special")):  # fmt: skip
        answer = api.post("/api/admin/user-admin", {"email": f"{unique('w')}@e.com", "password": weak})
        record = assert_error(answer, 400, "ValidationError", "password")
        assert rule in record["message"], (weak, record)


def test_sign_in_sets_a_session_that_needs_its_csrf_token_to_change_anything(api: Api) -> None:
    user = api.create_user(1)
    answer = api.post(
        "/auth/simple/login", {"username": user["email"].upper(), "password": PASSWORD}, token=None
    )
    assert (
        answer.status == 200 and answer.json()["id"] == user["id"] and "ADMIN" in answer.json()["permissions"]
    )
    cookies = [v for k, v in answer.all_headers if k == "set-cookie"]
    session_cookie = next(c for c in cookies if c.startswith("flagproxy_session="))
    assert "HttpOnly" in session_cookie and "SameSite=Lax" in session_cookie and "Max-Age=" in session_cookie
    session = api.login(user["email"])
    assert session.request("GET", "/api/admin/projects").status == 200
    name = unique("via-session")
    refused = session.request("POST", "/api/admin/projects", {"id": name, "name": name}, csrf=False)
    assert_error(refused, 403, "NoAccessError")
    assert session.request("POST", "/api/admin/projects", {"id": name, "name": name}).status == 201
    cookie_only = {"Cookie": f"flagproxy_session={session.cookie}"}
    assert_error(Api(api.port, None).post("/logout", headers=cookie_only), 403, "NoAccessError")
    assert session.request("GET", "/api/admin/projects").status == 200  # still signed in
    assert session.request("POST", "/logout").status == 200
    assert_error(session.request("GET", "/api/admin/projects"), 401, "AuthenticationRequired")


def test_wrong_credentials_say_nothing_about_which_part_and_repeated_failures_wait(api: Api) -> None:
    user = api.create_user(3)
    unknown = api.post("/auth/simple/login", {"username": "nobody@e.com", "password": PASSWORD}, token=None)
    wrong = api.post(
        "/auth/simple/login", {"username": user["email"], "password": "Wrong-pass-1"}, token=None
    )
    assert_error(unknown, 401, "AuthenticationRequired")
    assert_error(wrong, 401, "AuthenticationRequired")
    assert unknown.json()["message"] == wrong.json()["message"]
    for _ in range(4):
        api.post("/auth/simple/login", {"username": user["email"], "password": "Wrong-pass-1"}, token=None)
    assert api.get(f"/api/admin/user-admin/{user['id']}").json()["loginAttempts"] == 5
    locked = api.post("/auth/simple/login", {"username": user["email"], "password": PASSWORD}, token=None)
    assert_error(locked, 429, "TooManyRequestsError")  # even the right password waits its turn
    time.sleep(2.2)
    assert (
        api.post("/auth/simple/login", {"username": user["email"], "password": PASSWORD}, token=None).status
        == 200
    )
    assert api.get(f"/api/admin/user-admin/{user['id']}").json()["loginAttempts"] == 0


def test_personal_access_tokens(api: Api) -> None:
    user, secret = api.user_with_token(2)
    assert secret.startswith("user:") and len(secret) > 40
    as_user = Api(api.port, secret)
    me = as_user.get("/api/admin/user").json()["user"]
    assert me["id"] == user["id"]
    listed = as_user.get("/api/admin/user/tokens").json()["pats"]
    assert len(listed) == 1 and "secret" not in listed[0]
    assert secret not in as_user.get("/api/admin/user/tokens").body.decode()
    assert_error(
        as_user.post("/api/admin/user-admin", {"email": f"{unique('e')}@e.com"}), 403, "NoAccessError"
    )
    # Expired tokens and tokens of deleted users stop working.
    session = api.login(user["email"])
    short = session.request(
        "POST", "/api/admin/user/tokens", {"description": "brief", "expiresAt": soon(1.5)}
    )
    assert short.status == 201
    time.sleep(2)
    assert_error(
        Api(api.port, short.json()["secret"]).get("/api/admin/projects"), 401, "AuthenticationRequired"
    )
    assert as_user.delete(f"/api/admin/user/tokens/{listed[0]['id']}").status == 200
    assert_error(as_user.get("/api/admin/projects"), 401, "AuthenticationRequired")
    other, other_secret = api.user_with_token(3)
    assert api.delete(f"/api/admin/user-admin/{other['id']}").status == 200
    assert_error(Api(api.port, other_secret).get("/api/admin/projects"), 401, "AuthenticationRequired")


def test_invite_links_and_signup(api: Api) -> None:
    created = api.post("/api/admin/invite-link/tokens", {"name": unique("inv"), "expiresAt": soon(3600)})
    assert created.status == 201
    invite = created.json()
    secret = invite["secret"]
    assert invite["url"].endswith(f"/new-user?invite={secret}") and invite["enabled"] is True
    public = Api(api.port, None)
    assert public.get(f"/invite/{secret}/validate").status == 200
    assert_error(public.get("/invite/nope/validate"), 400, "ValidationError")
    email = f"{unique('Signer')}@example.com"
    body = {"email": email, "name": "Sig", "password": PASSWORD, "username": unique("sig")}
    answer = public.post(f"/invite/{secret}/signup", body)
    assert answer.status == 200, answer.body
    user = answer.json()
    assert set(user) == USER_FIELDS
    assert (user["rootRole"], user["emailSent"], user["permissions"], user["isAPI"]) == (3, False, [], False)
    assert (user["accountType"], user["scimId"]) == ("User", None) and user["inviteLink"].endswith(secret)
    for missing in ("email", "name", "password"):
        partial = {k: v for k, v in body.items() if k != missing}
        assert_error(public.post(f"/invite/{secret}/signup", partial), 400, "ValidationError", missing)
    again = {**body, "email": email.upper(), "username": unique("other")}
    assert_error(public.post(f"/invite/{secret}/signup", again), 409, "NameExistsError")
    same_username = {**body, "email": f"{unique('n')}@e.com"}
    assert_error(public.post(f"/invite/{secret}/signup", same_username), 409, "NameExistsError")
    not_json = public.post(
        f"/invite/{secret}/signup", body=b"email=x", headers={"Content-Type": "text/plain"}
    )
    assert_error(not_json, 415, "ContentTypeerror")
    assert_error(public.post("/invite/nope/signup", {**body, "email": "a@b.co"}), 400, "ValidationError")
    seen = api.get(f"/api/admin/invite-link/tokens/{secret}").json()
    assert [u["id"] for u in seen["users"]] == [user["id"]] and "secret" not in seen
    assert api.put(f"/api/admin/invite-link/tokens/{secret}", {"enabled": False}).status == 200
    disabled = public.post(f"/invite/{secret}/signup", {**body, "email": "z@b.co", "username": unique("z")})
    assert_error(disabled, 400, "ValidationError")
    expiring = api.post("/api/admin/invite-link/tokens", {"name": unique("inv"), "expiresAt": soon(1.2)})
    time.sleep(1.5)
    late = public.post(f"/invite/{expiring.json()['secret']}/signup", {**body, "email": "y@b.co"})
    assert_error(late, 400, "ValidationError")
    # The new Viewer signs in and reads, and changes nothing.
    viewer = Api(api.port, api.personal_token(email))
    assert viewer.get("/api/admin/projects").status == 200
    assert_error(viewer.post("/api/admin/projects", {"id": unique("p"), "name": "p"}), 403, "NoAccessError")


def test_custom_roles_in_both_body_shapes(api: Api) -> None:
    name = unique("Segmenter")
    by_name = api.post(
        "/api/admin/roles",
        {"name": name, "type": "root-custom", "permissions": [{"name": "CREATE_SEGMENT"}]},
    )
    assert by_name.status == 200 and by_name.json()["version"] == 1
    role = by_name.json()["roles"]
    assert set(role) >= {"id", "type", "name", "description", "project"} and role["type"] == "root-custom"
    assert_error(api.post("/api/admin/roles", {"name": name}), 409, "NameExistsError")
    ids = {p["name"]: p["id"] for p in api.get("/api/admin/roles/permissions").json()["environments"]}
    by_id = api.post(
        "/api/admin/roles",
        {"name": unique("Deployer"), "type": "custom",
         "permissions": [{"id": ids["UPDATE_FEATURE_ENVIRONMENT"], "environment": "production"}]},
    )  # fmt: skip
    assert by_id.status == 200 and by_id.json()["roles"]["type"] == "custom"
    detail = api.get(f"/api/admin/roles/{by_id.json()['roles']['id']}").json()
    assert detail["permissions"][0]["name"] == "UPDATE_FEATURE_ENVIRONMENT"
    assert detail["permissions"][0]["environment"] == "production"
    unknown = api.post(
        "/api/admin/roles", {"name": unique("r"), "permissions": [{"name": "FLY"}, {"id": 99999}]}
    )
    record = assert_error(unknown, 400, "ValidationError", "permissions")
    assert "FLY" in record["message"] and "99999" in record["message"]
    wrong_kind = api.post("/api/admin/roles", {"name": unique("r"), "type": "root-custom",
                                              "permissions": [{"name": "CREATE_FEATURE"}]})  # fmt: skip
    assert_error(wrong_kind, 400, "ValidationError", "permissions")
    assert_error(api.put("/api/admin/roles/1", {"name": "Boss"}), 403, "NoAccessError")
    assert_error(api.delete("/api/admin/roles/3"), 403, "NoAccessError")
    api.create_user(role["id"])
    assert_error(api.delete(f"/api/admin/roles/{role['id']}"), 409, "NameExistsError")
    renamed = api.put(f"/api/admin/roles/{by_id.json()['roles']['id']}", {"name": unique("Renamed")})
    assert renamed.status == 200
    assert api.delete(f"/api/admin/roles/{by_id.json()['roles']['id']}").status == 200
    assert any(r["id"] == 4 and r["name"] == "Owner" for r in api.get("/api/admin/roles").json()["roles"])


def test_groups(api: Api) -> None:
    first, second = api.create_user(3), api.create_user(3)
    created = api.post(
        "/api/admin/groups", {"name": unique("team"), "users": [{"user": {"id": first["id"]}}]}
    )
    assert created.status == 201
    group = created.json()
    assert [m["user"]["id"] for m in group["users"]] == [first["id"]]
    changed = api.put(
        f"/api/admin/groups/{group['id']}", {"name": group["name"], "users": [{"user": {"id": second["id"]}}]}
    )
    assert [m["user"]["id"] for m in changed.json()["users"]] == [second["id"]]
    assert_error(api.post("/api/admin/groups", {"name": group["name"]}), 409, "NameExistsError")
    assert_error(api.post("/api/admin/groups", {"name": unique("g"), "users": [{"user": {"id": 10**9}}]}),
                 400, "ValidationError", "users[0].user.id")  # fmt: skip
    assert any(g["id"] == group["id"] for g in api.get("/api/admin/groups").json()["groups"])
    assert api.delete(f"/api/admin/groups/{group['id']}").status == 200
    assert_error(api.get(f"/api/admin/groups/{group['id']}"), 404, "NotFoundError")


def test_project_access_replaces_adds_and_validates(api: Api) -> None:
    project = unique("acc")
    owner, owner_token = api.user_with_token(2)
    assert (
        Api(api.port, owner_token).post("/api/admin/projects", {"id": project, "name": project}).status == 201
    )
    creator = api.get(f"/api/admin/projects/{project}/access").json()
    assert [(u["id"], u["roles"]) for u in creator["users"]] == [(owner["id"], [4])]  # the creator owns it
    a, b = api.create_user(3), api.create_user(3)
    group = api.post("/api/admin/groups", {"name": unique("g")}).json()
    path = f"/api/admin/projects/{project}/access"
    answer = api.put(
        path,
        {"roles": [{"id": 5, "users": [a["id"]], "groups": [group["id"]]}, {"id": 6, "users": [b["id"]]}]},
    )
    assert answer.status == 200 and answer.body == b""
    shown = api.get(path).json()
    assert {u["id"]: u["roles"] for u in shown["users"]} == {a["id"]: [5], b["id"]: [6]}  # the owner is gone
    assert {g["id"]: g["roles"] for g in shown["groups"]} == {group["id"]: [5]}
    assert api.post(path, {"roles": [4], "users": [b["id"]]}).status == 200
    assert {u["id"]: u["roles"] for u in api.get(path).json()["users"]} == {a["id"]: [5], b["id"]: [4, 6]}
    assert_error(api.put(path, {"roles": [{"id": 99999}]}), 400, "ValidationError", "roles[0].id")
    assert_error(
        api.put(path, {"roles": [{"id": 3, "users": [a["id"]]}]}), 400, "ValidationError", "roles[0].id"
    )
    assert_error(
        api.put(path, {"roles": [{"id": 5, "users": [10**9]}]}), 400, "ValidationError", "roles[0].users[0]"
    )
    assert_error(
        api.put(path, {"roles": [{"id": 5, "groups": [10**9]}]}), 400, "ValidationError", "roles[0].groups[0]"
    )
    assert_error(api.put(path, {"nope": 1}), 400, "ValidationError")
    assert_error(api.put(f"/api/admin/projects/{unique('none')}/access", {"roles": []}), 404, "NotFoundError")
    assert {u["id"]: u["roles"] for u in api.get(path).json()["users"]} == {a["id"]: [5], b["id"]: [4, 6]}


def test_concurrent_access_replacements_leave_one_whole_configuration(api: Api) -> None:
    project = unique("race")
    assert api.post("/api/admin/projects", {"id": project, "name": project}).status == 201
    users = [api.create_user(3)["id"] for _ in range(6)]
    configurations = [
        {"roles": [{"id": 5, "users": users[:3]}, {"id": 6, "users": users[3:]}]},
        {"roles": [{"id": 4, "users": users[3:]}, {"id": 5, "users": users[:3]}]},
        {"roles": [{"id": 6, "users": users}]},
    ]
    expected = [
        {u: [5] for u in users[:3]} | {u: [6] for u in users[3:]},
        {u: [5] for u in users[:3]} | {u: [4] for u in users[3:]},
        {u: [6] for u in users},
    ]
    path = f"/api/admin/projects/{project}/access"
    for _ in range(3):
        threads = [threading.Thread(target=api.put, args=(path, body)) for body in configurations * 3]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        final = {u["id"]: u["roles"] for u in api.get(path).json()["users"]}
        assert final in expected, final


def test_identity_changes_are_events_without_secrets(api: Api, server: ServerProcess) -> None:
    user, secret = api.user_with_token(3)
    api.post("/auth/simple/login", {"username": user["email"], "password": "Wrong-pass-1"}, token=None)
    invite = api.post("/api/admin/invite-link/tokens", {"name": unique("inv"), "expiresAt": soon(600)}).json()
    made = api.post("/api/admin/api-tokens", {"tokenName": unique("t"), "type": "client"}).json()
    assert api.delete(f"/api/admin/api-tokens/{made['secret']}").status == 200
    page = api.get("/api/admin/events?limit=50").json()
    types = [event["type"] for event in page["events"]]
    assert {"user-created", "pat-created", "user-login-failed", "invite-link-created"} <= set(types)
    assert {"api-token-created", "api-token-deleted"} <= set(types)
    assert page["totalEvents"] >= len(page["events"]) and page["events"][0]["id"] > page["events"][-1]["id"]
    assert len(api.get("/api/admin/events?limit=2&offset=1").json()["events"]) == 2
    assert_error(api.get("/api/admin/events?limit=many"), 400, "ValidationError", "limit")
    everything = api.get("/api/admin/events?limit=1000").body.decode()
    log = Path(server.log_path).read_text() if server.log_path else ""
    for text in (everything, log, api.get("/api/admin/user-admin").body.decode()):
        assert PASSWORD not in text and secret not in text and invite["secret"] not in text
        assert made["secret"] not in text
        assert "$argon2" not in text
