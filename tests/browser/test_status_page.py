"""The status page (`/proxy/status`, flagproxy/proxy/status_page.py) as a person sees it, in headless
Chromium, against a real `flagproxy proxy --workers 2`: ready, the revision, the upstream, requests per
second and each flag with its yes/no counts; the key form when no key is given. A screenshot is saved in
the test's temporary folder; any console error fails the test."""

from __future__ import annotations

import json

import pytest

from tests.http.loopback import KEY, SAMPLE
from tests.http.test_workers import proxy_env, send_named

pytestmark = pytest.mark.slow


def test_the_status_page_shows_the_instance_at_a_glance(browser, launch, upstream, tmp_path):
    process = launch(proxy_env(upstream), ["--workers", "2"])
    process.wait_ready()
    sent = send_named(process, 20, workers=2)
    page, errors = browser.page()
    page.goto(f"http://127.0.0.1:{process.port}/proxy/status#key={KEY}")

    page.wait_for_function("document.getElementById('revision').textContent.includes('(upstream)')")
    assert page.inner_text("#ready") == "ready"
    assert page.inner_text("#upstream") == upstream.url
    assert page.inner_text("#flags") == str(len(SAMPLE["features"]))
    assert page.inner_text("#fetch").startswith("ok ")
    # Requests per second needs two readings (2 s apart).
    page.wait_for_function("/^[0-9]+\\.[0-9]$/.test(document.getElementById('rps').textContent)")

    names = page.locator("#rows tr td:first-child").all_inner_texts()
    assert names == sorted(f["name"] for f in SAMPLE["features"])
    row = page.locator("#rows tr", has_text="default-on").first
    totals = row.locator("td").all_inner_texts()
    assert totals[0] == "default-on"
    assert totals[4:6] == [str(sent), "0"]  # yes and no since start, summed over both workers

    page.screenshot(path=str(tmp_path / "status-page.png"), full_page=True)
    assert (tmp_path / "status-page.png").stat().st_size > 10_000
    assert errors == []


def test_without_a_key_the_page_asks_for_one(browser, launch, upstream, tmp_path):
    process = launch(proxy_env(upstream))
    process.wait_ready()
    page, errors = browser.page()
    page.goto(f"http://127.0.0.1:{process.port}/proxy/status")
    page.wait_for_selector("#keyform:not(.hidden)")
    assert "Enter a client key" in page.inner_text("#error")
    assert page.inner_text("#revision") == "\u2013"  # a dash: nothing shown without a key
    page.fill("#key", KEY)
    page.click("#keyform button")
    page.wait_for_function("document.getElementById('revision').textContent.includes('(upstream)')")
    assert page.locator("#keyform").is_hidden()
    page.screenshot(path=str(tmp_path / "status-page-key.png"))
    # The browser logs the 401 of the first reading as a failed resource load; nothing else may fail.
    assert [e for e in errors if "401" not in e] == []
    assert json.loads(page.evaluate("JSON.stringify(sessionStorage)"))["flagproxy-status-key"] == KEY
