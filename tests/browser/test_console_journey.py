"""The whole journey of issue 16 as people do it, in headless Chromium against a real `flagproxy server`
with a real `flagproxy proxy` in front of it: an Admin signs in, creates a flag, gives it a 30% rollout
with a constraint on its page, turns it on in development, and the proxy's answer changes; the Admin makes
an invite link, a colleague signs up through it in a second browser context and, signed in as that
Viewer, finds the switches disabled; the playground explains one answer. Every page's screenshot is
saved in the test's temporary folder; any browser console error fails the test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from tests.browser.test_console_flag_page import add_rollout_with_constraint
from tests.demo.processes import ProxyProcess
from tests.demo.timing import wait_for_propagation
from tests.sdk.oracle import sdk_buckets
from tests.server.harness import PASSWORD, unique

pytestmark = pytest.mark.slow


@pytest.fixture
def proxy(console, tmp_path) -> Iterator[ProxyProcess]:
    started = ProxyProcess(console.url, 500, log_path=str(tmp_path / "proxy.log")).start()
    yield started
    assert started.stop() == 0, (tmp_path / "proxy.log").read_text()


def _users(flag: str) -> tuple[str, str, int]:
    """A user inside the 30% rollout of `flag`, one outside it (the flag's name is its group), and the
    inside one's bucket, as the official Node SDK computes them."""
    buckets = sdk_buckets(flag, (f"user-{i}" for i in range(200)))
    inside = next(user for user, bucket in buckets.items() if bucket <= 30)
    outside = next(user for user, bucket in buckets.items() if bucket > 30)
    return inside, outside, buckets[inside]


def _proxy_says(proxy: ProxyProcess, flag: str, user: str, country: str) -> bool:
    status, body = proxy.request(
        "POST", "/proxy", {"context": {"userId": user, "properties": {"country": country}}}
    )
    assert status == 200, body
    return flag in {toggle["name"] for toggle in body["toggles"]}


def test_the_whole_journey(console, browser, proxy):
    flag = unique("journey")
    inside, outside, bucket = _users(flag)

    # An Admin signs in and creates a flag in the default project.
    admin, admin_errors = browser.page()
    console.sign_in(admin, console.admin_email, start="/console/projects/default")
    admin.fill("#create-flag input[name=name]", flag)
    admin.click("#create-flag button[type=submit]")
    admin.locator(f"#flag-table tr[data-flag='{flag}']").wait_for()
    console.shot(admin, "journey-1-flag-created")

    # On its page: a 30% rollout with a constraint (country is NO), then on in development.
    admin.click(f"#flag-table tr[data-flag='{flag}'] a:text('{flag}')")
    admin.wait_for_url(f"{console.url}/console/projects/default/features/{flag}")
    add_rollout_with_constraint(admin, "30", "country", "IN", "NO")
    console.shot(admin, "journey-2-rollout")
    assert not _proxy_says(proxy, flag, inside, "NO")
    with admin.expect_navigation():
        admin.click("section.environment[data-env=development] input.switch")
    expect(admin.locator("section.environment[data-env=development] input.switch")).to_be_checked()
    console.shot(admin, "journey-3-on-in-development")

    # The running proxy's answer changes: on for a user inside the rollout where the constraint holds.
    wait_for_propagation(lambda: _proxy_says(proxy, flag, inside, "NO"))
    assert not _proxy_says(proxy, flag, outside, "NO")  # outside the 30%
    assert not _proxy_says(proxy, flag, inside, "SE")  # the constraint fails

    # The Admin makes an invite link; a colleague signs up through it in a second browser context.
    admin.goto(console.url + "/console/users")
    admin.fill("#create-invite input[name=name]", "colleagues")
    admin.click("#create-invite button[type=submit]")
    admin.locator("#invite-url").wait_for(state="visible")
    invite_url = admin.inner_text("#invite-url")
    assert invite_url.startswith(console.url + "/new-user?invite=")
    console.shot(admin, "journey-4-invite")

    colleague, colleague_errors = browser.page()  # its own context: no cookie of the Admin's
    colleague.goto(invite_url)
    email = f"{unique('colleague')}@example.com"
    colleague.fill("#signup input[name=name]", "Cora Colleague")
    colleague.fill("#signup input[name=email]", email)
    colleague.fill("#signup input[name=password]", PASSWORD)
    console.shot(colleague, "journey-5-signup")
    colleague.click("#signup button[type=submit]")
    colleague.wait_for_url(console.url + "/console/login")

    # Signed in as that Viewer, the switches are there and disabled.
    console.sign_in(colleague, email, start="/console/projects/default")
    assert colleague.inner_text("#signed-in-as") == email
    switch = colleague.locator(f"#flag-table tr[data-flag='{flag}'] input.switch[data-env=development]")
    expect(switch).to_be_checked()
    expect(switch).to_be_disabled()
    console.shot(colleague, "journey-6-viewer")

    # The playground explains one answer: the bucket against 30% and the constraint's value.
    colleague.goto(console.url + "/console/playground")
    colleague.fill("#playground input[name=userId]", inside)
    colleague.fill("#playground textarea[name=context]", '{"properties": {"country": "NO"}}')
    colleague.click("#playground button[type=submit]")
    row = colleague.locator(f"#playground-results tr[data-flag='{flag}']")
    expect(row.locator("[data-answer]")).to_have_text("on")
    assert row.locator("[data-reason]").inner_text() == "strategy 1 (flexibleRollout) matched"
    assert f"bucket {bucket} of 100" in row.locator("[data-condition]").inner_text()
    assert "context value NO → true" in row.locator(".explain li").first.inner_text()
    console.shot(colleague, "journey-7-playground")

    assert admin_errors == [] and colleague_errors == []
