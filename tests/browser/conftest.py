"""Headless Chromium for the browser tests: Debian's /usr/bin/chromium (apt package `chromium`, installed
by .ci/run) driven by Playwright for Python through `executable_path`, since Playwright's own browser
downloads are not reachable here. A missing browser is a failure, never a skip.

Every page records its console errors and uncaught exceptions; `Browser.page()` hands them back so each
test can assert there were none."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, sync_playwright

from flagproxy.demo import seed
from tests.browser.console import console  # noqa: F401  (fixture)
from tests.browser.origin import Origin
from tests.http.conftest import base_env, launch, loop_thread, upstream  # noqa: F401  (fixtures)
from tests.server import harness

CHROMIUM = os.environ.get("FLAGPROXY_TEST_CHROMIUM", "/usr/bin/chromium")


class Browser:
    def __init__(self, browser: Any) -> None:
        self.browser = browser

    def page(self) -> tuple[Page, list[str]]:
        """A fresh page (its own context: no shared storage) and the list its console errors go to."""
        context = self.browser.new_context(viewport={"width": 1100, "height": 900})
        page = context.new_page()
        errors: list[str] = []
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: errors.append(f"uncaught: {error}"))
        return page, errors


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One Chromium per test module. Not per session: Playwright's sync API keeps an event loop running
    on the main thread while it is open, and tests after these call asyncio.run()."""
    assert os.access(CHROMIUM, os.X_OK), f"{CHROMIUM} is missing: apt-get install chromium (see .ci/run)"
    with sync_playwright() as playwright:
        # --no-sandbox: CI runs as root, where Chromium refuses its sandbox.
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield Browser(chromium)
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def origin() -> Iterator[Origin]:
    """The pages' own web site, on another loopback port than the proxy: calls are cross-origin."""
    site = Origin()
    yield site
    site.close()


@pytest.fixture
def flag_server(tmp_path: Path) -> Iterator[harness.ServerProcess]:
    """A real `flagproxy server` on SQLite with the demo's sample flags."""
    env = harness.base_env(DATABASE_PATH=str(tmp_path / "flags.db"))
    server = harness.ServerProcess(env, log_path=str(tmp_path / "server.log")).start()
    seed(server.url, harness.ADMIN_TOKEN)
    yield server
    assert server.stop() == 0
