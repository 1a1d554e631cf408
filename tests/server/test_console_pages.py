"""The console's pages through HTTP on SQLite and PostgreSQL: every page renders for an Admin and a Viewer
with the security headers and without inline script, style or event-handler attributes (the
Content-Security-Policy would block them); no session gets the login page (htmx requests a 401 with
HX-Redirect); something that does not exist gets an HTML error page; a change made with the session
cookie needs the CSRF header."""

from __future__ import annotations

import re

from tests.server.harness import Api, Session, unique

PAGES = [
    "/console/projects",
    "/console/projects/default",
    "/console/projects/default/flags/table?q=x",
    "/console/projects/default/access",
    "/console/projects/default/settings",
    "/console/archive",
    "/console/environments",
    "/console/playground",
    "/console/playground/results?environment=development&userId=u1",
    "/console/segments",
    "/console/users",
    "/console/roles",
    "/console/groups",
    "/console/events",
    "/console/events?offset=1&limit=2",
    "/console/me",
]
INLINE = re.compile(rb"<script(?![^>]*\bsrc=)|<style|\sstyle=|\son[a-z]+=", re.IGNORECASE)


def _session(api: Api, root_role: int) -> Session:
    user = api.create_user(root_role)
    return api.login(user["email"])


def _checked_page(session: Session, path: str) -> bytes:
    answer = session.request("GET", path)
    assert answer.status == 200, (path, answer.body[:300])
    assert answer.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in answer.headers["content-security-policy"], path
    assert answer.headers["x-frame-options"] == "DENY"
    assert not INLINE.search(answer.body), (path, INLINE.search(answer.body))
    return answer.body


def test_every_page_renders_for_an_admin_and_a_viewer(api: Api):
    name = unique("paged")
    api.create_feature(name)
    api.add_strategy(name, {"name": "flexibleRollout", "parameters": {"rollout": "30"}})
    admin, viewer = _session(api, 1), _session(api, 3)
    for path in [*PAGES, f"/console/projects/default/features/{name}"]:
        assert b"Sign out" in _checked_page(admin, path) or "results" in path or "table" in path
        _checked_page(viewer, path)
    assert b'id="create-token"' in _checked_page(admin, "/console/tokens")
    assert viewer.request("GET", "/console/tokens").status == 403
    flag_page = _checked_page(viewer, f"/console/projects/default/features/{name}")
    assert b"strategy-form" not in flag_page and b"add-strategy" not in flag_page


def test_without_a_session_pages_lead_to_the_login(api: Api):
    anonymous = Api(api.port, None)
    for path in PAGES:
        answer = anonymous.get(path)
        assert answer.status == 302 and answer.headers["location"].startswith("/console/login?next="), path
    fragment = anonymous.get("/console/projects/default/flags/table", headers={"HX-Request": "true"})
    assert fragment.status == 401 and fragment.headers["hx-redirect"].startswith("/console/login")
    ended = Session(api.port, "not-a-session", "x", {})
    assert ended.request("GET", "/console/projects").status == 302
    assert anonymous.get("/console/login").status == 200
    assert anonymous.get(f"/new-user?invite={unique('nope')}").status == 400


def test_what_does_not_exist_is_an_error_page_or_record(api: Api):
    admin = _session(api, 1)
    missing = admin.request("GET", f"/console/projects/{unique('nope')}")
    assert missing.status == 404 and missing.headers["content-type"].startswith("text/html")
    assert b'id="error-message"' in missing.body
    as_htmx = admin.request("GET", "/console/playground/results?environment=nowhere", json=None)
    assert as_htmx.status == 404
    bad = Api(api.port, None).request(
        "GET",
        "/console/playground/results?environment=development&context=%7Bnope",
        headers={"Cookie": f"flagproxy_session={admin.cookie}", "HX-Request": "true"},
    )
    assert bad.status == 400 and "not valid JSON" in bad.json()["message"]


def test_a_cookie_change_needs_the_csrf_header(api: Api):
    name = unique("csrf")
    api.create_feature(name)
    admin = _session(api, 1)
    path = f"/api/admin/projects/default/features/{name}/environments/development/on"
    assert admin.request("POST", path, csrf=False).status == 403
    assert Session(admin.port, admin.cookie, "forged", admin.user).request("POST", path).status == 403
    assert api.listed_feature(name)["enabled"] is False
    assert admin.request("POST", path).status == 200
    assert api.listed_feature(name)["enabled"] is True


def test_odd_input_in_console_urls_is_a_clear_answer_never_a_500(api: Api):
    admin = _session(api, 1)
    odd = [
        "/console/projects/default/flags/table?tag=nocolon",
        "/console/projects/default/flags/table?tag=%00:%00&q=%00",
        "/console/projects/%00",
        "/console/projects/default/features/%E2%9C%93",
        "/console/projects/default/access?x=1",
        "/console/playground/results",
        "/console/playground/results?environment=development&projects=nope",
        "/console/playground/results?environment=development&context=%5B1%5D",
        "/console/playground/results?environment=development&context=%7B%22properties%22%3A1%7D",
        "/console/playground/results?environment=development&currentTime=yesterday&remoteAddress=x",
        "/console/login?next=%0d%0aSet-Cookie:x=1",
        "/new-user",
        "/new-user?invite=%00",
    ]
    for path in odd:
        answer = admin.request("GET", path)
        assert answer.status < 500, (path, answer.status, answer.body[:200])
        assert answer.status in (200, 400, 404), (path, answer.status)
        if answer.status == 400:
            assert b'id="error-message"' in answer.body or b"invite-unusable" in answer.body, path


def test_the_event_log_pages_and_refuses_bad_paging(api: Api):
    for _ in range(3):
        api.post("/api/admin/projects", {"id": unique("ev"), "name": "ev"})
    admin = _session(api, 1)
    total = api.get("/api/admin/search/events?limit=1").json()["total"]
    second = _checked_page(admin, "/console/events?offset=2&limit=2").decode()
    assert f"Events 3 to 4 of {total}" in second
    assert 'href="/console/events?offset=0&amp;limit=2"' in second  # newer
    assert 'href="/console/events?offset=4&amp;limit=2"' in second  # older
    wanted = [e["id"] for e in api.get("/api/admin/search/events?offset=2&limit=2").json()["events"]]
    assert re.findall(r'data-id="(\d+)"', second) == [str(i) for i in wanted]
    for query, field in (("offset=x", "offset"), ("limit=0", "limit"), ("limit=1001", "limit")):
        refused = admin.request("GET", f"/console/events?{query}")
        assert refused.status == 400 and refused.headers["content-type"].startswith("text/html"), query
        assert f"&#34;{field}&#34;".encode() in refused.body or f'"{field}"'.encode() in refused.body, query
