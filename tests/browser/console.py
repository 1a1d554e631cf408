"""Shared steps of the console's browser tests: a real `flagproxy server` (SQLite) with an Admin and a
Viewer, and signing in through the login page as a person does."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Page

from tests.server.harness import PASSWORD, Api, ServerProcess, base_env, unique

# The screenshots docs/console.md shows: the test's name for one -> its file in docs/console/. Run the
# console's browser tests with FLAGPROXY_DOC_SHOTS=docs/console to take them again (docs/console.md).
DOC_SHOTS = {
    "project-flags": "project-flags",
    "flag-page": "flag-page",
    "flag-page-strategy-form": "strategy-form",
    "flag-page-variant-rows": "variant-rows",
    "flag-page-facts": "flag-facts",
    "playground": "playground",
    "viewer-project": "viewer-project",
    "tokens": "tokens",
    "users": "users",
    "roles": "roles",
    "project-access": "project-access",
    "project-settings": "project-settings",
    "invite-expiry": "invite-expiry",
    "events-older": "events",
    "journey-5-signup": "signup",
}


@dataclass
class Console:
    server: ServerProcess
    admin_email: str
    viewer_email: str
    shots: Path

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def api(self) -> Api:
        return self.server.api()

    def sign_in(
        self, page: Page, email: str, password: str = PASSWORD, start: str = "/console/projects"
    ) -> None:
        page.goto(self.url + start)
        page.wait_for_selector("#login")
        page.fill("input[name=username]", email)
        page.fill("input[name=password]", password)
        page.click("#login button[type=submit]")
        page.wait_for_url(self.url + start)

    def submit_refused(self, page: Page, form: str, field: str, value: str) -> str:
        """Fill `field` of `form` with a value the server refuses, submit, and return the message shown
        beside the form."""
        page.fill(f"{form} [name='{field}']", value)
        page.click(f"{form} button[type=submit]")
        message = page.locator(f"{form} [data-error]")
        message.wait_for(state="visible")
        return message.inner_text()

    def shot(self, page: Page, name: str) -> None:
        path = self.shots / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 5_000
        docs = os.environ.get("FLAGPROXY_DOC_SHOTS")
        if docs and name in DOC_SHOTS:
            shutil.copyfile(path, Path(docs) / f"{DOC_SHOTS[name]}.png")


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    folder = tmp_path_factory.mktemp("console")
    server = ServerProcess(
        base_env(DATABASE_PATH=str(folder / "flags.db")), log_path=str(folder / "server.log")
    ).start()
    try:
        api = server.api()
        admin = api.create_user(1, email=f"{unique('admin')}@example.com", name="Ada Admin")
        viewer = api.create_user(3, email=f"{unique('viewer')}@example.com", name="Vic Viewer")
        shots = folder / "screenshots"
        shots.mkdir()
        yield Console(server, admin["email"], viewer["email"], shots)
    finally:
        assert server.stop() == 0, (folder / "server.log").read_text()
