"""The console's playground page in headless Chromium: a context entered as fields and JSON, every flag's
answer with the reasons (constraint values, the rollout bucket), the same answer as the API's; bad JSON
gets a message. Screenshots in the test's temporary folder; any console error fails."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.server.test_playground import flag_with_rollout

pytestmark = pytest.mark.slow


def test_the_playground_explains_an_answer(console, browser):
    api = console.api
    name = flag_with_rollout(api)
    page, errors = browser.page()
    console.sign_in(page, console.viewer_email, start="/console/playground")

    page.fill("#playground input[name=userId]", "user-7")
    page.fill("#playground textarea[name=context]", '{"properties": {"country": "NO"}}')
    page.click("#playground button[type=submit]")
    row = page.locator(f"#playground-results tr[data-flag='{name}']")
    row.wait_for()
    expected = api.post(
        "/api/admin/playground?explain=true",
        {"environment": "development", "context": {"userId": "user-7", "properties": {"country": "NO"}}},
    ).json()
    feature = next(f for f in expected["features"] if f["name"] == name)
    bucket = feature["strategies"]["data"][0]["condition"]["bucket"]
    expect(row.locator("[data-answer]")).to_have_text("on" if feature["isEnabled"] else "off")
    assert row.locator("[data-reason]").inner_text() == feature["reason"]
    # The deciding strategy's details are open; others are folded, so read the text either way.
    details = row.locator("details").first
    assert (details.get_attribute("open") is not None) == feature["isEnabled"]
    assert "context value NO → true" in " ".join(details.locator(".explain li").first.text_content().split())
    condition = " ".join(row.locator("[data-condition]").first.text_content().split())
    assert f"bucket {bucket} of 100" in condition and "rollout 30%" in condition
    console.shot(page, "playground")

    assert "not valid JSON" in console.submit_refused(page, "#playground", "context", "{not json")
    assert [e for e in errors if "400" not in e] == []
