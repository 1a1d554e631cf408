"""Fixtures for the flag server tests: every server test runs once on SQLite and once on PostgreSQL.

PostgreSQL is the server at 127.0.0.1:5432 (user postgres, trust auth; FLAGPROXY_TEST_POSTGRES
overrides the admin URL). Each session creates its own databases and drops them at the end. If
PostgreSQL cannot be reached the postgres tests fail; they are never skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.server.harness import Api, PostgresDatabases, ServerProcess, base_env

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(scope="session")
def postgres_databases() -> Iterator[PostgresDatabases]:
    databases = PostgresDatabases()
    yield databases
    databases.drop_all()


@pytest.fixture(scope="session")
def backend_env(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[str], dict[str, str]]]:
    """A function giving the environment for a fresh database of the requested backend."""

    def fresh(backend: str) -> dict[str, str]:
        if backend == "postgres":
            databases: PostgresDatabases = request.getfixturevalue("postgres_databases")
            return {"DATABASE_URL": databases.create()}
        path = tmp_path_factory.mktemp("sqlite") / "flags.db"
        return {"DATABASE_PATH": str(path)}

    yield fresh


@pytest.fixture(scope="session", params=BACKENDS)
def server(
    request: pytest.FixtureRequest,
    backend_env: Callable[[str], dict[str, str]],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ServerProcess]:
    """One running server per backend, shared by the tests of the session (they use unique names)."""
    log = Path(tmp_path_factory.mktemp("logs")) / f"server-{request.param}.log"
    process = ServerProcess(base_env(**backend_env(request.param)), log_path=str(log))
    process.backend = request.param  # type: ignore[attr-defined]
    process.start()
    yield process
    assert process.stop() == 0, log.read_text()


@pytest.fixture
def api(server: ServerProcess) -> Api:
    return server.api()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """For tests that start their own servers (fresh database each)."""
    return request.param
