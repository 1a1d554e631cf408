"""The console against its own route table, on SQLite and PostgreSQL: every console page (each GET route
under /console, and the signup page) is rendered for an Admin and for a Viewer, and every action a page
offers (each element or form with hx-post, hx-put, hx-delete) is traced to the server route it calls.

- Every page carries the security headers and no inline script, style or event handler.
- A Viewer's and an Editor's pages offer no enabled control whose route the API would refuse them (a
  Viewer: only what acts for the person themself, signing out and their personal access tokens); a page
  showing what an API read route returns (the token list) is refused to whoever that route refuses.
- Every action an Admin's pages offer is an admin API route (or /logout); each is refused without the
  CSRF header (403), and refused to a Viewer who sends it anyway (403) unless it acts for the person
  themself.
- Every change the server takes with a session cookie (each non-GET admin route, and /logout) is refused
  without the CSRF header; sign-in and signup, before there is a session, take only JSON.
- The Admin's pages offer every action the console is meant to (the set below): none is lost unnoticed.
- No page shows an API token's or personal access token's secret again; Revoke names a token, and
  Disable an invite link, by its digest. An archived flag's page offers reviving it and nothing else.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from typing import Any

from flagproxy.server.app import create_app
from flagproxy.server.settings import ServerSettings
from tests.server.harness import Api, Response, Session, unique
from tests.server.test_console_pages import INLINE
from tests.server.test_permission_matrix import allowed

WRITES = ("post", "put", "delete", "patch")
FIELDS = ("input", "select", "textarea", "button")
# The people besides the Admin, by root role id, and their letter in test_permission_matrix's table (whose
# project rows hold here too: an Editor's flag permissions hold in every project, the default one included).
ROLES = {"Viewer": 3, "Editor": 2}
LETTERS = {"Viewer": "V", "Editor": "E"}
# A page that shows what an API read route returns is refused to whoever that route refuses.
PAGE_READS = {"/console/tokens": "/api/admin/api-tokens"}
# Pages that answer a form: what it sends.
QUERIES = {
    "/console/playground/results": "?environment=development&userId=u1",
    "/console/projects/<project_id:str>/flags/table": "?q=flag&tag=simple%3Aconsole",
}
# What an Admin's pages offer, by the name of the route each action calls.
OFFERED = {
    "signin.logout",
    "projects.create_project",
    "features.create_feature",
    "features.update_feature",
    "features.archive_feature",
    "features.revive_feature",
    "features.feature_on",
    "features.feature_off",
    "features.put_variants",
    "features.add_dependency",
    "features.remove_dependency",
    "tags.add_tag",
    "tags.remove_tag",
    "strategies.add_strategy",
    "strategies.replace_strategy",
    "strategies.delete_strategy",
    "strategies.set_sort_order",
    "environments.create_environment",
    "environments.environment_on",
    "environments.environment_off",
    "segments.create_segment",
    "segments.update_segment",
    "segments.delete_segment",
    "api_tokens.create_token",
    "api_tokens.delete_token",
    "users.create_user",
    "users.update_user",
    "users.delete_user",
    "invites.create_invite",
    "invites.update_invite",
    "roles.create_role",
    "roles.update_role",
    "roles.delete_role",
    "groups.create_group",
    "groups.update_group",
    "groups.delete_group",
    "access.add_access",
    "access.set_access",
    "personal_tokens.create_token",
    "personal_tokens.delete_token",
}


@dataclass
class Control:
    method: str
    url: str
    enabled: bool
    tag: str


@dataclass
class _Form:
    control: Control
    fields: list[bool] = field(default_factory=list)  # enabled or not, per field and button


class Controls(HTMLParser):
    """Every element that would change something when used: (method, url, enabled). A form with hx-post
    (or a plain method=post form) is enabled when any of its fields or buttons is; a button or switch with
    its own hx-post when it is not disabled."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[Control] = []
        self.form: _Form | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        write = next(((m, named[f"hx-{m}"]) for m in WRITES if named.get(f"hx-{m}")), None)
        if write is None and tag == "form" and (named.get("method") or "").lower() == "post":
            write = ("post", named.get("action") or "")
        disabled = "disabled" in named
        if tag == "form":
            self.form = _Form(Control(write[0], write[1] or "", False, tag)) if write else None
            return
        if write is not None:
            self.found.append(Control(write[0], write[1] or "", not disabled, tag))
        elif self.form is not None and tag in FIELDS and named.get("type") != "hidden":
            self.form.fields.append(not disabled)

    def handle_endtag(self, tag: str) -> None:
        if tag == "form" and self.form is not None:
            self.form.control.enabled = any(self.form.fields)
            self.found.append(self.form.control)
            self.form = None


def controls(page: bytes) -> list[Control]:
    parser = Controls()
    parser.feed(page.decode())
    parser.close()
    return parser.found


@dataclass
class Route:
    method: str
    pattern: re.Pattern[str]
    name: str
    params: int
    template: str

    @property
    def admin(self) -> bool:
        return self.template.startswith("/api/admin/")

    def sample(self) -> str:
        """The path with every parameter filled with something (the CSRF check comes before the route)."""
        return re.sub(r"<\w+:[^>]+>", "x", self.template)


def _routes() -> tuple[list[str], list[Route]]:
    """The console's pages (path templates) and every route that changes something."""
    app = create_app(ServerSettings.load({}, {}), name=unique("console-routes").replace("-", "_"))
    pages, writes = [], []
    for route in app.router.routes:
        path = "/" + route.path
        name = route.name.split(".", 1)[1] if "." in route.name else route.name
        page = path.startswith("/console") or path == "/new-user"
        if "GET" in route.methods and page and not path.startswith("/console/static"):
            pages.append(path)
        for method in route.methods:
            if method.lower() in WRITES:
                parts = re.split(r"(<\w+:[^>]+>)", path)
                regex = "".join(
                    (".+" if ":path>" in p else "[^/]+") if p.startswith("<") else re.escape(p) for p in parts
                )
                writes.append(Route(method, re.compile(regex + "$"), name, len(parts) // 2, path))
    return pages, writes


PAGES, WRITE_ROUTES = _routes()


def route_of(control: Control) -> Route | None:
    path = control.url.split("?", 1)[0]
    matches = [r for r in WRITE_ROUTES if r.method == control.method.upper() and r.pattern.match(path)]
    return min(matches, key=lambda r: r.params) if matches else None


class World:
    """One of each thing a page lists, so that every action a page can offer is on it."""

    def __init__(self, api: Api) -> None:
        self.api = api
        soon = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.parent, self.flag, archived = unique("parent"), unique("flag"), unique("archived")
        for name in (self.parent, self.flag, archived):
            api.create_feature(name)
        api.add_strategy(self.flag, {"name": "flexibleRollout", "parameters": {"rollout": "30"}})
        api.add_strategy(self.flag, {"name": "default"})
        api.switch(self.flag, True)  # on in one environment, off in the others: both switches
        quiet = unique("quiet")
        assert api.post("/api/admin/environments", {"name": quiet, "type": "test"}).status < 300
        assert api.post(f"/api/admin/environments/{quiet}/off").status < 300
        base = f"/api/admin/projects/default/features/{self.flag}"
        assert api.post(f"{base}/dependencies", {"feature": self.parent}).status == 200
        tag = {"type": "simple", "value": "console"}
        assert api.post(f"/api/admin/features/{self.flag}/tags", tag).status < 300
        variants = [{"name": "blue", "weightType": "variable", "weight": 1000, "stickiness": "default"}]
        assert api.put(f"{base}/environments/development/variants", variants).status == 200
        assert api.delete(f"/api/admin/projects/default/features/{archived}").status < 300
        api.create_segment(unique("seg"), [])
        role = api.post("/api/admin/roles", {"name": unique("role"), "type": "custom"}).json()["roles"]
        self.admin_user = api.create_user(1)
        self.people = {label: api.login(api.create_user(role)["email"]) for label, role in ROLES.items()}
        members = [{"user": {"id": api.create_user(3)["id"]}}]
        group = api.post("/api/admin/groups", {"name": unique("group"), "users": members}).json()
        access = {"roles": [{"id": role["id"], "groups": [group["id"]]}]}
        assert api.put("/api/admin/projects/default/access", access).status == 200
        token = {"tokenName": unique("tok"), "type": "client", "environment": "development"}
        made = api.post("/api/admin/api-tokens", token)
        assert made.status == 201
        self.secrets = [made.json()["secret"]]
        invite = api.post("/api/admin/invite-link/tokens", {"name": unique("inv"), "expiresAt": soon})
        self.invite = invite.json()["secret"]
        self.admin = api.login(self.admin_user["email"])
        for session in (self.admin, *self.people.values()):
            mine = {"description": unique("pat"), "expiresAt": soon}
            made = session.request("POST", "/api/admin/user/tokens", mine)
            assert made.status == 201
            self.secrets.append(made.json()["secret"])

    def pages(self) -> Iterator[str]:
        values = {"project_id": "default", "name": self.flag}
        for template in PAGES:
            if template == "/new-user":
                yield f"/new-user?invite={self.invite}"
                continue
            path = re.sub(r"<(\w+):[^>]+>", lambda m: values[m.group(1)], template)
            yield path + QUERIES.get(template, "")


def _page(session: Session | None, path: str, api: Api) -> Response:
    if session is None:
        answer = Api(api.port, None).get(path)
    else:
        answer = session.request("GET", path)
    if answer.status in (301, 302):
        return answer
    assert answer.headers["content-type"].startswith("text/html"), path
    assert "script-src 'self'" in answer.headers["content-security-policy"], path
    assert answer.headers["x-frame-options"] == "DENY", path
    assert not INLINE.search(answer.body), (path, INLINE.search(answer.body))
    return answer


def test_console_pages_offer_only_what_the_api_allows_and_every_action_needs_csrf(api: Api) -> None:
    world = World(api)
    paths = list(world.pages())
    assert len(paths) >= 15 and "/console/projects/default/features/" + world.flag in paths
    problems: list[Any] = []
    offered: dict[tuple[str, str], Route] = {}

    for path in paths:
        if path.startswith("/console/login") or path.startswith("/new-user"):
            assert _page(None, path, api).status == 200, path  # the pages before signing in
            continue
        if path == "/console":
            assert world.admin.request("GET", path).status == 302
            continue
        admin_page = _page(world.admin, path, api)
        assert admin_page.status == 200, (path, admin_page.body[:300])
        shown = [secret for secret in world.secrets if secret.encode() in admin_page.body]
        assert not shown, f"{path} shows a secret again"
        for control in controls(admin_page.body):
            route = route_of(control)
            if route is None:
                problems.append(("offers something that is no route", path, control))
            elif not (route.admin or route.template == "/logout"):
                problems.append(("offers something that is not the admin API", path, control))
            elif control.enabled:
                offered[(control.method.upper(), control.url)] = route

        for label, session in world.people.items():
            their_page = _page(session, path, api)
            read = PAGE_READS.get(path.split("?")[0])
            if read and not allowed(LETTERS[label], "GET", read):
                assert their_page.status == 403, (label, path)
                continue
            assert their_page.status == 200, (label, path, their_page.body[:300])
            for control in controls(their_page.body):
                route = route_of(control)
                if control.enabled and (route is None or _refused(label, route)):
                    problems.append(
                        (f"a{'n' if label[0] in 'AEIOU' else ''} {label} is offered", path, control)
                    )

    missing = OFFERED - {route.name for route in offered.values()}
    assert not missing, f"the Admin's pages no longer offer {sorted(missing)}"

    for (method, url), route in offered.items():
        without_csrf = world.admin.request(method, url, {} if method != "DELETE" else None, csrf=False)
        if without_csrf.status != 403 or b"CSRF" not in without_csrf.body:
            problems.append(("taken without the CSRF header", method, url, without_csrf.status))
        if _refused("Viewer", route):
            anyway = world.people["Viewer"].request(method, url, {} if method != "DELETE" else None)
            if anyway.status != 403:
                problems.append(("a Viewer's request taken", method, url, anyway.status))
    assert problems == [], problems

    # A token is revoked by what the page names it by (its digest), not by its secret.
    revoke = f"/api/admin/api-tokens/{hashlib.sha256(world.secrets[0].encode()).hexdigest()}"
    assert ("DELETE", revoke) in offered
    assert world.admin.request("DELETE", revoke).status == 200
    assert api.get("/api/client/features", token=world.secrets[0]).status == 401
    # So is an invite link disabled: the server keeps only its digest, and the page names it by that.
    disable = f"/api/admin/invite-link/tokens/{hashlib.sha256(world.invite.encode()).hexdigest()}"
    assert ("PUT", disable) in offered
    assert world.admin.request("PUT", disable, {"enabled": False}).status == 200
    assert Api(api.port, None).get(f"/new-user?invite={world.invite}").status == 400


def _refused(label: str, route: Route) -> bool:
    if not route.admin:
        return False  # /logout, sign-in and signup act for the person themself
    return not allowed(LETTERS[label], route.method, route.template)


def test_every_change_made_with_a_session_cookie_needs_the_csrf_header(api: Api) -> None:
    admin = api.login(api.create_user(1)["email"])
    checked = 0
    for route in WRITE_ROUTES:
        if not (route.admin or route.template == "/logout"):
            continue  # sign-in, signup and the proxies' routes take no session cookie
        sample = route.sample()
        answer = admin.request(
            route.method, sample, {} if route.method in ("POST", "PUT") else None, csrf=False
        )
        assert answer.status == 403 and b"CSRF" in answer.body, (route.method, sample, answer.status)
        checked += 1
    assert checked >= 40
    assert admin.request("GET", "/api/admin/projects").status == 200  # the session is still there
    # Before there is a session: sign-in and signup take only JSON, which a form on another site cannot
    # send (a cross-site fetch with that content type needs a preflight this server never grants).
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    for path in ("/auth/simple/login", f"/invite/{unique('inv')}/signup"):
        answer = Api(api.port, None).request("POST", path, body=b"username=a&password=b", headers=form)
        assert answer.status == 415, (path, answer.status)


def test_an_archived_flags_page_offers_reviving_it_and_nothing_else(api: Api) -> None:
    name = unique("gone")
    api.create_feature(name)
    api.add_strategy(name, {"name": "default"})
    assert api.delete(f"/api/admin/projects/default/features/{name}").status < 300
    admin = api.login(api.create_user(1)["email"])
    page = admin.request("GET", f"/console/projects/default/features/{name}")
    assert page.status == 200 and b'id="archived-notice"' in page.body
    offered = [control for control in controls(page.body) if control.enabled]
    assert [(c.method, c.url) for c in offered if c.url != "/logout"] == [
        ("post", f"/api/admin/archive/revive/{name}")
    ]
    assert admin.request("POST", f"/api/admin/archive/revive/{name}").status == 200
    revived = admin.request("GET", f"/console/projects/default/features/{name}")
    assert b'id="archived-notice"' not in revived.body and b"add-strategy" in revived.body
