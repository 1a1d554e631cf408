"""A flag's page in headless Chromium: a 30% flexibleRollout with a constraint added through the strategy
form, edited, its constraint checked before sending (a NUM_GT value that is not a number), variants with a
JSON payload checked, a strategy deleted, disabled and reordered; stale, impression data, tags and
dependencies edited, usage from client metrics shown; a Viewer gets the page without any editor.
Screenshots in the test's temporary folder; any console error fails."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.server.harness import CLIENT_TOKEN, unique

pytestmark = pytest.mark.slow

PATH = "/api/admin/projects/default/features/{}/environments/development/strategies"


def _open_add_form(page, environment="development"):
    section = page.locator(f"section.environment[data-env={environment}]")
    section.locator("details.add-strategy > summary").click()
    return section.locator("details.add-strategy form")


def add_rollout_with_constraint(page, rollout: str, field: str, operator: str, values: str):
    """The journey's step, as a person does it: open the form, set the rollout, add one constraint."""
    form = _open_add_form(page)
    form.locator("select[name=name]").select_option("flexibleRollout")
    form.locator("[data-param=rollout]").fill(rollout)
    form.locator("[data-add-constraint]").click()
    row = form.locator(".constraint-row").last
    row.locator('[data-c="contextName"]').fill(field)
    row.locator('[data-c="operator"]').select_option(operator)
    row.locator('[data-c="values"]').fill(values)
    with page.expect_navigation():
        form.locator("button[type=submit]").click()


def test_strategies_and_variants_are_edited_on_the_flag_page(console, browser):
    api = console.api
    name = unique("edited")
    api.create_feature(name)
    page, errors = browser.page()
    page.on("dialog", lambda dialog: dialog.accept())
    console.sign_in(page, console.admin_email, start=f"/console/projects/default/features/{name}")

    add_rollout_with_constraint(page, "30", "country", "IN", "NO\nSE")
    (strategy,) = api.get(PATH.format(name)).json()
    assert strategy["name"] == "flexibleRollout"
    assert strategy["parameters"] == {"rollout": "30", "stickiness": "default", "groupId": name}
    assert strategy["constraints"] == [
        {"contextName": "country", "operator": "IN", "values": ["NO", "SE"], "caseInsensitive": False,
         "inverted": False}
    ]  # fmt: skip
    console.shot(page, "flag-page")

    # A constraint the API would refuse is caught before anything is sent, and its row is marked.
    form = _open_add_form(page)
    form.locator("[data-add-constraint]").click()
    row = form.locator(".constraint-row").last
    row.locator('[data-c="contextName"]').fill("age")
    row.locator('[data-c="operator"]').select_option("NUM_GT")
    assert row.locator('[data-c="values"]').is_hidden()
    row.locator('[data-c="value"]').fill("old")
    form.locator("button[type=submit]").click()
    message = form.locator("[data-error]")
    message.wait_for(state="visible")
    assert message.inner_text() == "Constraint 1: the value must be a number"
    assert "invalid" in (row.get_attribute("class") or "")
    console.shot(page, "flag-page-strategy-form")
    assert len(api.get(PATH.format(name)).json()) == 1

    # Edit: the form is filled with the strategy; a new rollout is saved in place.
    card = page.locator(f".strategy[data-strategy='{strategy['id']}']")
    card.locator("details > summary").click()
    card.locator("[data-param=rollout]").fill("50")
    with page.expect_navigation():
        card.locator("button[type=submit]").click()
    (edited,) = api.get(PATH.format(name)).json()
    assert edited["id"] == strategy["id"] and edited["parameters"]["rollout"] == "50"
    assert edited["constraints"] == strategy["constraints"]

    variants = page.locator("section.environment[data-env=development] .variants-form")
    page.locator("section.environment[data-env=development] details:has(.variants-form) > summary").click()
    variants.locator("[data-add-variant]").click()
    blue = variants.locator(".variant-row").last
    blue.locator('[data-v="name"]').fill("blue")
    blue.locator('[data-v="payloadType"]').select_option("json")
    blue.locator('[data-v="payloadValue"]').fill("{nope")
    variants.locator("button[type=submit]").click()
    variants.locator("[data-error]").wait_for(state="visible")
    assert (
        variants.locator("[data-error]").inner_text().startswith("Variant 1: the JSON payload is not valid")
    )
    blue.locator('[data-v="payloadValue"]').fill('{"x": 1}')
    variants.locator("[data-add-variant]").click()
    red = variants.locator(".variant-row").last
    red.locator('[data-v="name"]').fill("red")
    red.locator('[data-v="overrides"]').fill("userId=ann,bob")
    console.shot(page, "flag-page-variant-rows")
    with page.expect_navigation():
        variants.locator("button[type=submit]").click()
    saved = api.get(f"/api/admin/projects/default/features/{name}/environments/development/variants").json()
    assert [(v["name"], v["weight"]) for v in saved["variants"]] == [("blue", 500), ("red", 500)]
    assert saved["variants"][0]["payload"] == {"type": "json", "value": '{"x": 1}'}
    assert saved["variants"][1]["overrides"] == [{"contextName": "userId", "values": ["ann", "bob"]}]
    console.shot(page, "flag-page-variants")

    with page.expect_navigation():
        page.locator(f".strategy[data-strategy='{strategy['id']}'] button:text('Delete')").click()
    assert api.get(PATH.format(name)).json() == []
    assert errors == []


def test_a_viewer_reads_the_flag_page_without_editors(console, browser):
    name = unique("read")
    console.api.create_feature(name)
    console.api.add_strategy(name, {"name": "default"})
    page, errors = browser.page()
    console.sign_in(page, console.viewer_email, start=f"/console/projects/default/features/{name}")
    assert page.locator("details.add-strategy").count() == 0
    assert page.locator(".strategy button:text('Delete')").count() == 0
    assert page.locator(".strategy-form").count() == 0
    assert page.locator("section.environment input.switch").first.is_disabled()
    assert page.locator("#flag-settings input[name=description]").is_disabled()
    console.shot(page, "flag-page-viewer")
    assert errors == []


def test_strategies_are_reordered_with_move_up_and_down(console, browser):
    api = console.api
    name = unique("reordered")
    api.create_feature(name)
    first, second = (
        api.add_strategy(name, {"name": "userWithId", "parameters": {"userIds": user}})["id"] for user in "ab"
    )
    page, errors = browser.page()
    console.sign_in(page, console.admin_email, start=f"/console/projects/default/features/{name}")
    assert page.locator(f".strategy[data-strategy='{first}'] [data-move=up]").count() == 0
    with page.expect_navigation():
        page.click(f".strategy[data-strategy='{second}'] [data-move=up]")
    assert [s["id"] for s in api.get(PATH.format(name)).json()] == [second, first]
    order = page.locator("section.environment[data-env=development] .strategy").evaluate_all(
        "cards => cards.map(card => card.dataset.strategy)"
    )
    assert order == [second, first]
    with page.expect_navigation():
        page.click(f".strategy[data-strategy='{second}'] [data-move=down]")
    assert [s["id"] for s in api.get(PATH.format(name)).json()] == [first, second]
    assert errors == []


def test_a_flags_facts_dependencies_tags_usage_and_a_disabled_strategy(console, browser):
    """Stale and impression data saved from the page (the stale badge appears here and in the project's
    table, beside the lifecycle stage), a tag added and removed, a dependency on a parent added and
    removed, usage from client metrics shown, a strategy disabled through its form and a remoteAddress
    strategy added with its IPs and a segment."""
    api = console.api
    parent, name = unique("parent"), unique("facts")
    api.create_feature(parent)
    api.create_feature(name)
    strategy = api.add_strategy(name, {"name": "default"})
    segment = api.create_segment(
        unique("beta"), [{"contextName": "plan", "operator": "IN", "values": ["beta"]}]
    )
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    metrics = {
        "appName": "checkout-service",
        "instanceId": "i-1",
        "bucket": {"start": now, "stop": now, "toggles": {name: {"yes": 7, "no": 2}}},
    }
    assert api.post("/api/client/metrics", metrics, token=CLIENT_TOKEN).status == 202
    page, errors = browser.page()
    console.sign_in(page, console.admin_email, start=f"/console/projects/default/features/{name}")
    base = f"/api/admin/projects/default/features/{name}"

    usage = page.locator("#usage tbody tr")
    assert usage.count() == 1
    assert usage.first.locator("td").all_inner_texts() == ["development", "checkout-service", "7", "2"]
    assert page.locator("#flag-name .badge.stale").count() == 0

    page.fill("#flag-settings input[name=description]", "checkout button colour")
    page.check("#flag-settings input[name='stale:bool']")
    page.check("#flag-settings input[name='impressionData:bool']")
    with page.expect_navigation():
        page.click("#flag-settings button[type=submit]")
    saved = api.get(base).json()
    assert (saved["description"], saved["stale"], saved["impressionData"]) == (
        "checkout button colour",
        True,
        True,
    )
    assert page.locator("#flag-name .badge.stale").count() == 1
    assert page.locator("#flag-settings input[name='impressionData:bool']").is_checked()

    page.fill("#add-tag input[name=value]", "checkout")
    with page.expect_navigation():
        page.click("#add-tag button[type=submit]")
    assert {"type": "simple", "value": "checkout"} in api.get(f"/api/admin/features/{name}/tags").json()[
        "tags"
    ]
    with page.expect_navigation():
        page.click("#tags button[aria-label='remove tag']")
    assert api.get(f"/api/admin/features/{name}/tags").json()["tags"] == []

    page.select_option("#add-dependency select[name=feature]", parent)
    with page.expect_navigation():
        page.click("#add-dependency button[type=submit]")
    assert [d["feature"] for d in api.get(base).json()["dependencies"]] == [parent]
    assert parent in page.locator("#dependencies").inner_text()
    console.shot(page, "flag-page-facts")
    with page.expect_navigation():
        page.click("#dependencies button[aria-label='remove dependency']")
    assert api.get(base).json()["dependencies"] == []

    card = page.locator(f".strategy[data-strategy='{strategy['id']}']")
    card.locator("details > summary").click()
    card.locator("input[name=disabled]").check()
    with page.expect_navigation():
        card.locator("button[type=submit]").click()
    assert api.get(PATH.format(name)).json()[0]["disabled"] is True
    assert "disabled" in (
        page.locator(f".strategy[data-strategy='{strategy['id']}']").get_attribute("class") or ""
    )

    form = _open_add_form(page)
    form.locator("select[name=name]").select_option("remoteAddress")
    form.locator("fieldset:not([hidden]) [data-param=IPs]").fill("10.0.0.1\n192.168.0.0/16")
    form.locator(f"input[data-segment][value='{segment['id']}']").check()
    with page.expect_navigation():
        form.locator("button[type=submit]").click()
    added = api.get(PATH.format(name)).json()[-1]
    assert (added["name"], added["parameters"]) == ("remoteAddress", {"IPs": "10.0.0.1,192.168.0.0/16"})
    assert added["segments"] == [segment["id"]]

    page.goto(console.url + "/console/projects/default")
    row = page.locator(f"#flag-table tr[data-flag='{name}']")
    assert row.locator(".badge.stale").count() == 1
    assert api.listed_feature(name)["lifecycle"]["stage"] in row.inner_text()
    assert errors == []
