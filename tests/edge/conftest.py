"""Fixtures for `flagproxy edge` tests: a real `flagproxy server` upstream (SQLite) seeded with flags in
two environments and two projects, and a counting stub upstream for token validation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.edge.harness import CountingUpstream
from tests.http.conftest import loop_thread
from tests.http.loopback import LoopThread
from tests.server.harness import Api, ServerProcess, base_env

DEV_CLIENT = "*:development.test-client-secret"
PROD_CLIENT = "*:production.test-client-prod-secret"
DEFAULT_DEV_CLIENT = "default:development.test-client-default-project-secret"
DEV_FRONTEND = "*:development.test-frontend-secret"
PROD_FRONTEND = "*:production.edge-frontend-prod-secret"
DEFAULT_DEV_FRONTEND = "default:development.edge-frontend-default-secret"


@pytest.fixture(scope="session")
def upstream_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """Flags: `everywhere` on in both environments, `prod-only` on in production only (off in
    development), `other-flag` in project `other`, on in development."""
    folder = Path(tmp_path_factory.mktemp("edge-upstream"))
    env = base_env(DATABASE_PATH=str(folder / "flags.db"))
    env["INIT_FRONTEND_API_TOKENS"] += f",{PROD_FRONTEND},{DEFAULT_DEV_FRONTEND}"
    process = ServerProcess(env, log_path=str(folder / "server.log"))
    process.start()
    api = process.api()
    answer = api.post("/api/admin/projects", {"id": "other", "name": "Other"})
    assert answer.status in (200, 201), answer.body
    answer = api.post(
        "/api/admin/api-tokens",
        {
            "tokenName": "other-frontend",
            "type": "frontend",
            "environment": "development",
            "projects": ["other"],
        },
    )
    assert answer.status == 201, answer.body
    process.other_frontend = answer.json()["secret"]  # type: ignore[attr-defined]
    strategy = {"name": "default", "constraints": [], "parameters": {}}
    for name, project, environments in (
        ("everywhere", "default", ("development", "production")),
        ("prod-only", "default", ("production",)),
        ("other-flag", "other", ("development",)),
    ):
        api.create_feature(name, project)
        for environment in ("development", "production"):
            api.add_strategy(name, strategy, environment, project)
        for environment in environments:
            api.switch(name, True, environment, project)
    yield process
    assert process.stop() == 0


@pytest.fixture(scope="session")
def other_frontend(upstream_server: ServerProcess) -> str:
    return str(upstream_server.other_frontend)  # type: ignore[attr-defined]


@pytest.fixture
def admin(upstream_server: ServerProcess) -> Api:
    return upstream_server.api()


@pytest.fixture
def counting(loop_thread: LoopThread) -> Iterator[CountingUpstream]:
    stub = CountingUpstream(loop_thread)
    yield stub
    stub.stop()


__all__ = ["loop_thread"]  # the loop-thread fixture of tests/http, used here too
