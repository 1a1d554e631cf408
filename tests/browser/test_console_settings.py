"""The console's project settings (rename; delete, refused while the project holds flags), an invite link's
expiry changed in place, and paging through the event log, in headless Chromium against a real server.
Screenshots in the test's temporary folder; any console error fails."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.server.harness import unique

pytestmark = pytest.mark.slow


def test_an_admin_renames_a_project_and_deletes_it_once_its_flags_are_archived(console, browser):
    project = unique("shop")
    assert console.api.post("/api/admin/projects", {"id": project, "name": "Shop"}).status == 201
    flag = unique("checkout")
    console.api.create_feature(flag, project)
    page, errors = browser.page()
    page.on("dialog", lambda dialog: dialog.accept())
    console.sign_in(page, console.admin_email, start=f"/console/projects/{project}")
    with page.expect_navigation():
        page.click("a:text('Settings')")
    page.fill("#rename-project input[name=name]", "Web shop")
    page.fill("#rename-project input[name=description]", "What customers buy with")
    with page.expect_navigation():
        page.click("#rename-project button[type=submit]")
    assert "Web shop" in page.inner_text("h1")
    shown = console.api.get(f"/api/admin/projects/{project}").json()
    assert (shown["name"], shown["description"]) == ("Web shop", "What customers buy with")
    assert "not archived" in page.inner_text("#delete-rule")
    console.shot(page, "project-settings")

    # The API's rule: a project holding a flag that is not archived stays, and the page says why.
    page.click("#delete-project button[type=submit]")
    message = page.locator("#delete-project [data-error]")
    message.wait_for(state="visible")
    assert "active feature flags" in message.inner_text()
    assert console.api.get(f"/api/admin/projects/{project}").status == 200

    assert console.api.delete(f"/api/admin/projects/{project}/features/{flag}").status == 202
    page.reload()
    assert "1 archived flag will be deleted" in page.inner_text("#delete-rule")
    with page.expect_navigation():
        page.click("#delete-project button[type=submit]")
    assert page.url == console.url + "/console/projects"
    assert project not in page.inner_text("#projects")
    assert console.api.get(f"/api/admin/projects/{project}").status == 404
    assert [e for e in errors if "403" not in e] == []  # the refused delete's 403


def test_a_viewer_sees_the_settings_but_no_form(console, browser):
    page, errors = browser.page()
    console.sign_in(page, console.viewer_email, start="/console/projects/default/settings")
    assert "Default" in page.inner_text("main")
    assert page.locator("#rename-project").count() == 0 and page.locator("#delete-project").count() == 0
    assert errors == []


def test_the_default_project_offers_no_delete(console, browser):
    page, errors = browser.page()
    console.sign_in(page, console.admin_email, start="/console/projects/default/settings")
    assert page.locator("#rename-project").count() == 1 and page.locator("#delete-project").count() == 0
    assert "cannot be deleted" in page.inner_text("main")
    assert errors == []


def test_an_admin_changes_an_invite_links_expiry(console, browser):
    name = unique("invite")
    soon = (datetime.now(UTC) + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:00Z")
    assert console.api.post("/api/admin/invite-link/tokens", {"name": name, "expiresAt": soon}).status == 201
    later = (datetime.now(UTC) + timedelta(days=20)).replace(second=0, microsecond=0)
    page, errors = browser.page()
    console.sign_in(page, console.admin_email, start="/console/users")
    row = page.locator(f"#invites tr[data-invite='{name}']")
    assert row.locator("input[name=expiresAt]").input_value() == soon[:16]
    row.locator("input[name=expiresAt]").fill(later.strftime("%Y-%m-%dT%H:%M"))
    with page.expect_navigation():
        row.locator("button:text('Change expiry')").click()
    listed = console.api.get("/api/admin/invite-link/tokens").json()["tokens"]
    saved = next(t for t in listed if t["name"] == name)
    assert saved["expiresAt"].startswith(later.strftime("%Y-%m-%dT%H:%M"))
    assert page.locator(f"#invites tr[data-invite='{name}'] input[name=expiresAt]").input_value() == (
        later.strftime("%Y-%m-%dT%H:%M")
    )
    console.shot(page, "invite-expiry")
    assert errors == []


def test_the_event_log_pages_through_older_events(console, browser):
    for _ in range(105):  # more than a page: each new project is an event
        project = unique("log")
        assert console.api.post("/api/admin/projects", {"id": project, "name": project}).status == 201
    total = console.api.get("/api/admin/search/events?limit=1").json()["total"]
    page, errors = browser.page()
    console.sign_in(page, console.admin_email, start="/console/events")

    def shown_ids() -> list[int]:
        return [
            int(i)
            for i in page.locator("#events tr[data-id]").evaluate_all("rs => rs.map(r => r.dataset.id)")
        ]

    newest = shown_ids()
    assert len(newest) == 100 and newest == sorted(newest, reverse=True)
    assert page.inner_text("#events-shown").startswith(f"Events 1 to 100 of {total}")
    assert page.locator("a[data-page=newer]").count() == 0
    with page.expect_navigation():
        page.locator("a[data-page=older]").first.click()
    older = shown_ids()
    assert older and max(older) < min(newest)
    assert older == [
        e["id"] for e in console.api.get("/api/admin/search/events?offset=100&limit=100").json()["events"]
    ]
    assert page.inner_text("#events-shown").startswith(f"Events 101 to {100 + len(older)} of {total}")
    console.shot(page, "events-older")
    with page.expect_navigation():
        page.locator("a[data-page=newer]").first.click()
    assert shown_ids() == newest
    answer = page.goto(console.url + "/console/events?offset=soon")
    assert answer.status == 400 and '"offset"' in page.inner_text("#error-message")
    assert [e for e in errors if "400" not in e] == []
