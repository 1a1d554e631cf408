"""The console's people and resources pages in headless Chromium: API tokens (the secret shown once, it
works, revoked), users (added, role changed), roles, groups, project access, segments with a constraint,
and the event log; a Viewer is refused the token list and offered no forms. Screenshots in the test's
temporary folder; any console error fails."""

from __future__ import annotations

import pytest

from tests.server.harness import Api, unique

pytestmark = pytest.mark.slow


def _made_secret(console, browser, email: str, start: str, form: str, fields: dict[str, str]):
    """Sign in, fill and send a form whose answer is a secret shown once; (page, errors, the secret)."""
    page, errors = browser.page()
    page.on("dialog", lambda dialog: dialog.accept())
    console.sign_in(page, email, start=start)
    for field, value in fields.items():
        page.fill(f"{form} input[name={field}]", value)
    page.click(f"{form} button[type=submit]")
    shown = page.locator(".secret-box:not([hidden]) [data-secret]")
    shown.wait_for(state="visible")
    return page, errors, shown.inner_text()


def test_tokens_the_secret_is_shown_once_and_revoking_ends_it(console, browser):
    name = unique("sdk")
    page, errors, secret = _made_secret(
        console, browser, console.admin_email, "/console/tokens", "#create-token", {"tokenName": name}
    )
    assert secret.startswith("*:development.")
    assert Api(console.server.port, secret).get("/api/client/features").status == 200
    row = page.locator(f"#tokens tr[data-token='{name}']")
    row.wait_for()
    console.shot(page, "tokens")
    page.reload()
    assert secret not in page.content()  # listed by name and a masked prefix, never again in full
    with page.expect_navigation():
        page.locator(f"#tokens tr[data-token='{name}'] button:text('Revoke')").click()
    assert page.locator(f"#tokens tr[data-token='{name}']").count() == 0
    assert Api(console.server.port, secret).get("/api/client/features").status == 401
    assert errors == []


def _edit_membership(page, group: str, person: str, *, member: bool) -> None:
    """Open the group's edit form, tick or untick the person, save."""
    edit = page.locator(f"#groups tr[data-group='{group}'] details")
    edit.locator("summary").click()
    edit.locator("label", has_text=person).locator("input").set_checked(member)
    with page.expect_navigation():
        edit.locator("button[type=submit]").click()


def test_users_roles_groups_access_segments_and_events(console, browser):
    page, errors = browser.page()
    console.sign_in(page, console.admin_email, start="/console/users")
    email = f"{unique('new')}@example.com"
    page.fill("#create-user input[name=email]", email)
    page.fill("#create-user input[name=name]", "Nora New")
    with page.expect_navigation():
        page.click("#create-user button[type=submit]")
    user = next(u for u in console.api.get("/api/admin/user-admin").json()["users"] if u["email"] == email)
    assert user["rootRole"] == 3
    with page.expect_navigation():
        page.select_option(f"#users tr[data-user='{email}'] select", label="Editor")
    assert console.api.get(f"/api/admin/user-admin/{user['id']}").json()["rootRole"] == 2
    console.shot(page, "users")

    page.goto(console.url + "/console/roles")
    role = unique("releaser")
    page.fill("#create-role input[name=name]", role)
    page.select_option("#create-role select[name=type]", "custom")
    page.check("#create-role fieldset[data-for-role=custom] input[value=UPDATE_FEATURE_ENVIRONMENT]")
    with page.expect_navigation():
        page.click("#create-role button[type=submit]")
    assert "UPDATE_FEATURE_ENVIRONMENT" in page.locator(f"#roles tr[data-role='{role}']").inner_text()
    edit = page.locator(f"#roles tr[data-role='{role}'] details")
    edit.locator("summary").click()
    edit.locator("input[value=UPDATE_FEATURE_STRATEGY]").check()
    with page.expect_navigation():
        edit.locator("button[type=submit]").click()
    role_id = next(r["id"] for r in console.api.get("/api/admin/roles").json()["roles"] if r["name"] == role)
    held = {p["name"] for p in console.api.get(f"/api/admin/roles/{role_id}").json()["permissions"]}
    assert held == {"UPDATE_FEATURE_ENVIRONMENT", "UPDATE_FEATURE_STRATEGY"}
    console.shot(page, "roles")

    page.goto(console.url + "/console/groups")
    group = unique("team")
    page.fill("#create-group input[name=name]", group)
    page.locator("#create-group label", has_text="Nora New").locator("input").check()
    with page.expect_navigation():
        page.click("#create-group button[type=submit]")
    assert "Nora New" in page.locator(f"#groups tr[data-group='{group}']").inner_text()
    _edit_membership(page, group, "Nora New", member=False)
    assert "nobody" in page.locator(f"#groups tr[data-group='{group}']").inner_text()
    _edit_membership(page, group, "Nora New", member=True)

    page.goto(console.url + "/console/projects/default/access")
    page.select_option("#add-access select[name='roles:numbers']", label=role)
    page.select_option("#add-access select[name='groups:numbers']", label=group)
    with page.expect_navigation():
        page.click("#add-access button[type=submit]")
    assert group in page.inner_text("#access") and role in page.inner_text("#access")
    # Nora also holds Member here (through the API); taking the group's role back must leave hers.
    member = console.api.post("/api/admin/projects/default/access", {"roles": [5], "users": [user["id"]]})
    assert member.status == 200, member.body
    page.reload()
    before = console.api.get("/api/admin/projects/default/access").json()
    assert user["id"] in [u["id"] for u in before["users"]]
    page.on("dialog", lambda dialog: dialog.accept())
    with page.expect_navigation():
        page.click(f"#access tr[data-held='{group}:{role}'] button:text('Remove')")
    assert group not in page.inner_text("#access")
    after = console.api.get("/api/admin/projects/default/access").json()
    assert [g["name"] for g in after["groups"]] == [g["name"] for g in before["groups"] if g["name"] != group]
    assert [(u["id"], u["roles"]) for u in after["users"]] == [(u["id"], u["roles"]) for u in before["users"]]
    console.shot(page, "project-access")

    page.goto(console.url + "/console/segments")
    segment = unique("nordics")
    page.fill("#create-segment input[name=name]", segment)
    page.click("#create-segment [data-add-constraint]")
    page.fill('#create-segment [data-c="contextName"]', "country")
    page.fill('#create-segment [data-c="values"]', "NO, SE")
    with page.expect_navigation():
        page.click("#create-segment button[type=submit]")
    saved = next(s for s in console.api.get("/api/admin/segments").json()["segments"] if s["name"] == segment)
    assert saved["constraints"][0]["values"] == ["NO", "SE"]
    edit = page.locator(f"#segments tr[data-segment='{segment}'] details")
    edit.locator("summary").click()
    edit.locator('[data-c="values"]').fill("NO, SE, FI")
    with page.expect_navigation():
        edit.locator("button[type=submit]").click()
    saved = console.api.get(f"/api/admin/segments/{saved['id']}").json()
    assert saved["constraints"][0]["values"] == ["NO", "SE", "FI"] and saved["name"] == segment
    console.shot(page, "segments")

    page.goto(console.url + "/console/events")
    assert page.locator("#events tr[data-event='group-created']").count() >= 1
    console.shot(page, "events")
    assert errors == []


def test_a_viewer_is_refused_the_token_list_and_offered_no_forms(console, browser):
    page, errors = browser.page()
    console.sign_in(page, console.viewer_email, start="/console/users")
    assert page.locator("#create-user").count() == 0 and page.locator("#create-invite").count() == 0
    assert page.locator("#users select").count() == 0
    answer = page.goto(console.url + "/console/tokens")
    assert answer.status == 403
    assert "READ_CLIENT_API_TOKEN" in page.inner_text("#error-message")
    for path in ("/console/roles", "/console/groups", "/console/segments"):
        page.goto(console.url + path)
        assert page.locator("form.card").count() == 0, path
    assert [e for e in errors if "403" not in e] == []


def test_signup_explains_a_weak_password_and_a_dead_link(console, browser):
    expires = "2099-01-01T00:00:00Z"
    invite = console.api.post("/api/admin/invite-link/tokens", {"name": "weak", "expiresAt": expires}).json()
    page, errors = browser.page()
    page.goto(invite["url"])
    page.fill("#signup input[name=name]", "Wes Weak")
    page.fill("#signup input[name=email]", f"{unique('weak')}@example.com")
    message = console.submit_refused(page, "#signup", "password", "short")
    assert '"password"' in message and "10 characters" in message
    assert page.url == invite["url"]  # still on the form, nothing created
    page.goto(console.url + "/new-user?invite=" + unique("dead"))
    assert "unknown, disabled or has expired" in page.inner_text("#invite-unusable")
    assert [e for e in errors if "400" not in e] == []


def test_an_admin_disables_an_invite_link_and_enables_it_again(console, browser):
    name = unique("invite")
    expires = "2099-01-01T00:00:00Z"
    invite = console.api.post("/api/admin/invite-link/tokens", {"name": name, "expiresAt": expires}).json()
    anonymous = Api(console.server.port, None)
    page, errors = browser.page()
    console.sign_in(page, console.admin_email, start="/console/users")
    row = f"#invites tr[data-invite='{name}']"
    with page.expect_navigation():
        page.click(f"{row} button:text('Disable')")
    assert page.locator(f"{row} td").nth(2).inner_text() == "no"
    assert anonymous.get(f"/new-user?invite={invite['secret']}").status == 400
    with page.expect_navigation():
        page.click(f"{row} button:text('Enable')")
    assert anonymous.get(f"/new-user?invite={invite['secret']}").status == 200
    assert errors == []


def test_a_person_makes_and_deletes_a_personal_access_token(console, browser):
    description = unique("script")
    page, errors, secret = _made_secret(
        console,
        browser,
        console.viewer_email,
        "/console/me",
        "#create-personal-token",
        {"description": description},
    )
    assert secret.startswith("user:")
    assert (
        Api(console.server.port, secret).get("/api/admin/user").json()["user"]["email"]
        == console.viewer_email
    )
    row = page.locator(f"#personal-tokens tr[data-token='{description}']")
    row.wait_for()
    console.shot(page, "personal-tokens")
    row.locator("button:text('Delete')").click()
    row.wait_for(state="detached")
    assert Api(console.server.port, secret).get("/api/admin/user").status == 401
    assert errors == []


def test_environments_are_created_and_switched_by_an_admin_only(console, browser):
    page, errors = browser.page()
    console.sign_in(page, console.admin_email, start="/console/environments")
    name = unique("staging")
    page.fill("#create-environment input[name=name]", name)
    page.select_option("#create-environment select[name=type]", "test")
    with page.expect_navigation():
        page.click("#create-environment button[type=submit]")
    created = console.api.get(f"/api/admin/environments/{name}").json()
    assert created["type"] == "test" and created["sortOrder"] == 10 and created["enabled"] is True
    with page.expect_navigation():
        page.click(f"#environments tr[data-environment='{name}'] input.switch")
    assert console.api.get(f"/api/admin/environments/{name}").json()["enabled"] is False
    viewer, viewer_errors = browser.page()
    console.sign_in(viewer, console.viewer_email, start="/console/environments")
    assert viewer.locator("#create-environment").count() == 0
    assert viewer.locator(f"#environments tr[data-environment='{name}'] input.switch").is_disabled()
    assert errors == [] and viewer_errors == []
