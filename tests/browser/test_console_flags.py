"""The console's sign-in and flag table in headless Chromium against a real `flagproxy server`: the login
page, a project's flags with a switch per environment, search by name and tag, create, archive and revive;
a Viewer's switches disabled and the server's refusal anyway; CSRF on cookie-authenticated changes; the
security headers. Screenshots go to the test's temporary folder; any console error fails."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.server.harness import PASSWORD, Api, Session, unique

pytestmark = pytest.mark.slow


def _enabled(api: Api, flag: str, environment: str = "development") -> bool:
    return next(e["enabled"] for e in api.listed_feature(flag)["environments"] if e["name"] == environment)


def test_a_page_needs_a_session_and_carries_the_security_headers(console):
    answer = Api(console.server.port, None).get("/console/projects")
    assert answer.status == 302
    assert answer.headers["location"] == "/console/login?next=/console/projects"
    login = Api(console.server.port, None).get("/console/login")
    policy = login.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert "frame-ancestors 'none'" in policy
    assert b"<script>" not in login.body and b" on" + b"click" not in login.body
    htmx = Api(console.server.port, None).get("/console/static/vendor/htmx-2.0.8.min.js")
    assert htmx.status == 200 and b"htmx" in htmx.body
    assert Api(console.server.port, None).get("/console/static/vendor/htmx-LICENSE.txt").status == 200


def test_a_login_link_only_leads_inside_the_console(console):
    for target in ("https://evil.example/", "//evil.example/x", "/api/admin/user"):
        page = Api(console.server.port, None).get(f"/console/login?next={target}")
        assert b'data-then="redirect:/console/projects"' in page.body, target


def test_sign_in_switch_search_create_archive_and_revive(console, browser):
    api = console.api
    tagged = unique("tagged")
    api.create_feature(tagged)
    assert api.post(f"/api/admin/features/{tagged}/tags", {"type": "team", "value": "payments"}).status == 201
    page, errors = browser.page()
    page.on("dialog", lambda dialog: dialog.accept())

    console.sign_in(page, console.admin_email)
    console.shot(page, "projects")
    page.click("#projects a:text('Default')")
    page.wait_for_selector("#flag-table")

    name = unique("checkout")
    page.fill("#create-flag input[name=name]", name)
    page.fill("#create-flag input[name=description]", "made in the console")
    page.click("#create-flag button[type=submit]")
    row = page.locator(f"#flag-table tr[data-flag='{name}']")
    row.wait_for()
    assert "made in the console" in row.inner_text()
    assert api.listed_feature(name)["description"] == "made in the console"

    switch = row.locator("input.switch[data-env=development]")
    assert not switch.is_checked()
    switch.click()
    page.wait_for_selector(f"#flag-table tr[data-flag='{name}'] input.switch[data-env=development][checked]")
    assert _enabled(api, name)
    console.shot(page, "project-flags")

    # A name the API refuses: its message shows beside the form, nothing is created.
    assert '"name"' in console.submit_refused(page, "#create-flag", "name", "not a url friendly name")

    listed = page.locator("#flag-table tbody tr[data-flag]")
    page.fill("#q", name[:12])
    expect(listed).to_have_count(1)
    page.fill("#q", "")
    page.select_option("#tag", "team:payments")
    expect(listed).to_have_count(1)
    expect(listed.first).to_have_attribute("data-flag", tagged)
    console.shot(page, "project-search-by-tag")
    page.select_option("#tag", "")
    row.wait_for()

    row.locator("button:text('Archive')").click()
    row.wait_for(state="detached")
    assert api.get(f"/api/admin/projects/default/features/{name}").json()["archived"] is True
    page.goto(console.url + "/console/archive")
    page.locator(f"#archive tr[data-flag='{name}'] button:text('Revive')").click()
    page.wait_for_selector(f"#archive tr[data-flag='{name}']", state="detached")
    assert api.get(f"/api/admin/projects/default/features/{name}").json()["archived"] is False
    console.shot(page, "archive")
    # The one refused request above (400) is the only failed load the browser reports.
    assert [e for e in errors if "400" not in e] == []


def test_a_viewer_sees_disabled_switches_and_the_server_refuses_anyway(console, browser):
    name = unique("viewed")
    console.api.create_feature(name)
    page, errors = browser.page()
    console.sign_in(page, console.viewer_email, start="/console/projects/default")
    switch = page.locator(f"#flag-table tr[data-flag='{name}'] input.switch[data-env=development]")
    assert switch.is_disabled()
    assert page.locator("#create-flag").count() == 0
    assert page.locator("#flag-table button:text('Archive')").count() == 0
    console.shot(page, "viewer-project")
    # The same request the switch would send, with the CSRF header: refused by the admin API's check.
    status = page.evaluate(
        """async (path) => {
            const csrf = document.cookie.split('; ').find(c => c.startsWith('flagproxy_csrf=')).split('=')[1];
            const answer = await fetch(path, {method: 'POST', headers: {'X-CSRF-Token': csrf}});
            return answer.status;
        }""",
        f"/api/admin/projects/default/features/{name}/environments/development/on",
    )
    assert status == 403
    assert not _enabled(console.api, name)
    assert [e for e in errors if "403" not in e] == []


def test_a_change_without_the_csrf_header_is_refused(console, browser):
    name = unique("csrf")
    console.api.create_feature(name)
    page, errors = browser.page()
    console.sign_in(page, console.admin_email)
    path = f"/api/admin/projects/default/features/{name}/environments/development/on"
    without = page.evaluate("async (path) => (await fetch(path, {method: 'POST'})).status", path)
    assert without == 403
    assert not _enabled(console.api, name)
    wrong = page.evaluate(
        "async (path) => (await fetch(path, {method: 'POST', headers: {'X-CSRF-Token': 'x'}})).status", path
    )
    assert wrong == 403
    assert [e for e in errors if "403" not in e] == []


def test_signing_out_ends_the_session(console, browser):
    page, errors = browser.page()
    console.sign_in(page, console.admin_email)
    page.click("button:text('Sign out')")
    page.wait_for_url(console.url + "/console/login")
    page.goto(console.url + "/console/projects")
    page.wait_for_selector("#login")
    assert errors == []


def test_an_ended_session_leads_back_to_the_login_and_then_to_the_page(console, browser):
    name = unique("ended")
    console.api.create_feature(name)
    page, errors = browser.page()
    console.sign_in(page, console.admin_email, start="/console/projects/default")
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    # Signed out somewhere else (the session ends on the server); this page does not know yet.
    ended = Session(console.server.port, cookies["flagproxy_session"], cookies["flagproxy_csrf"], {})
    assert ended.request("POST", "/logout").status == 200
    page.click(f"#flag-table tr[data-flag='{name}'] input.switch[data-env=development]")
    page.wait_for_url(console.url + "/console/login?next=%2Fconsole%2Fprojects%2Fdefault")
    assert not _enabled(console.api, name)
    page.fill("input[name=username]", console.admin_email)
    page.fill("input[name=password]", PASSWORD)
    page.click("#login button[type=submit]")
    page.wait_for_url(console.url + "/console/projects/default")
    # A wrong password on the login page is a message there, not a loop back to it.
    page.context.clear_cookies()
    page.goto(console.url + "/console/login")
    page.fill("input[name=username]", console.admin_email)
    assert "wrong" in console.submit_refused(page, "#login", "password", "not-the-password")
    assert page.url == console.url + "/console/login"
    assert [e for e in errors if "401" not in e] == []
