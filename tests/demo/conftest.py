"""Fixtures for the end-to-end tests: a flag server (SQLite or PostgreSQL) and a proxy reading it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.demo.processes import ProxyProcess
from tests.server.harness import PostgresDatabases, ServerProcess, base_env

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(scope="module")
def postgres_databases() -> Iterator[PostgresDatabases]:
    databases = PostgresDatabases()
    yield databases
    databases.drop_all()


@pytest.fixture(params=BACKENDS)
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServerProcess]:
    if request.param == "postgres":
        database = {"DATABASE_URL": request.getfixturevalue("postgres_databases").create()}
    else:
        database = {"DATABASE_PATH": str(tmp_path / "flags.db")}
    process = ServerProcess(base_env(**database), log_path=str(tmp_path / "server.log")).start()
    yield process
    assert process.stop() == 0


@pytest.fixture
def proxy_factory(server: ServerProcess, tmp_path: Path) -> Iterator[type]:
    started: list[ProxyProcess] = []

    def start(refresh_interval_ms: int = 1000, *extra_args: str) -> ProxyProcess:
        proxy = ProxyProcess(
            server.url,
            refresh_interval_ms,
            log_path=str(tmp_path / f"proxy{len(started)}.log"),
            extra_args=extra_args,
        )
        started.append(proxy)
        return proxy.start()

    yield start  # type: ignore[misc]
    for proxy in started:
        proxy.stop()
