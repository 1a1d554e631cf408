"""Migrations and persistence, against a fresh database of each backend."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flagproxy.server.settings import ServerSettings
from flagproxy.server.storage import revision
from flagproxy.server.storage.database import SqliteDatabase, open_database
from flagproxy.server.storage.migrations import MIGRATIONS, migrate
from tests.server.harness import (
    ADMIN_TOKEN,
    CLIENT_TOKEN,
    ServerProcess,
    base_env,
    free_port,
    terminate,
    unique,
)

Fresh = Callable[[str], dict[str, str]]


def _database(env: dict[str, str]):
    return open_database(env.get("DATABASE_URL"), env.get("DATABASE_PATH", ""))


def test_migrations_apply_once_and_seed(backend: str, backend_env: Fresh) -> None:
    database = _database(backend_env(backend))
    try:
        assert migrate(database) == [m.version for m in MIGRATIONS]
        assert migrate(database) == []
        with database.transaction() as tx:
            versions = [row["version"] for row in tx.all("SELECT version FROM schema_migrations")]
            assert versions == [m.version for m in MIGRATIONS]
            assert [row["id"] for row in tx.all("SELECT id FROM projects")] == ["default"]
            environments = tx.all("SELECT name FROM environments ORDER BY sort_order")
            assert [row["name"] for row in environments] == ["development", "production"]
            before = revision.current(tx)
            revision.bump(tx)
            assert revision.current(tx) == before + 1
    finally:
        database.close()


def test_a_failed_transaction_leaves_nothing_behind(backend: str, backend_env: Fresh) -> None:
    database = _database(backend_env(backend))
    try:
        migrate(database)
        try:
            with database.transaction() as tx:
                tx.execute("INSERT INTO projects (id, name, created_at) VALUES (?, ?, ?)", ("p", "P", "now"))
                raise RuntimeError("abort")
        except RuntimeError:
            pass
        with database.transaction() as tx:
            assert tx.one("SELECT id FROM projects WHERE id = ?", ("p",)) is None
    finally:
        database.close()


def test_data_survives_a_restart(backend: str, backend_env: Fresh, tmp_path: Path) -> None:
    env = base_env(**backend_env(backend))
    name = unique("kept")
    first = ServerProcess(env, log_path=str(tmp_path / "first.log")).start()
    try:
        first.api().create_feature(name)
        first.api().switch(name, True)
        etag = first.api().get("/api/client/features", token=CLIENT_TOKEN).headers["etag"]
    finally:
        assert first.stop() == 0
    second = ServerProcess(env, log_path=str(tmp_path / "second.log")).start()
    try:
        assert second.api().listed_feature(name)["environments"][0]["enabled"] is True
        # Same data, same revision: a proxy's cached ETag stays valid across a server restart.
        again = second.api().get("/api/client/features", token=CLIENT_TOKEN, headers={"If-None-Match": etag})
        assert again.status == 304
        tokens = second.api().get("/api/admin/api-tokens").json()["tokens"]
        assert sum(t["secret"] == ADMIN_TOKEN for t in tokens) == 1  # INIT tokens are not duplicated
    finally:
        assert second.stop() == 0


def _applied_versions(env: dict[str, str]) -> list[int]:
    database = _database(env)
    try:
        with database.transaction(read_only=True) as tx:
            return [
                row["version"] for row in tx.all("SELECT version FROM schema_migrations ORDER BY version")
            ]
    finally:
        database.close()


def test_migrations_run_when_the_server_starts(backend: str, backend_env: Fresh, tmp_path: Path) -> None:
    env = base_env(**backend_env(backend))
    server = ServerProcess(env, log_path=str(tmp_path / "server.log")).start()
    try:
        assert _applied_versions(env) == [m.version for m in MIGRATIONS]
        names = [e["name"] for e in server.api().get("/api/admin/environments").json()["environments"]]
        assert names == ["development", "production"]
        assert [p["id"] for p in server.api().get("/api/admin/projects").json()["projects"]] == ["default"]
    finally:
        assert server.stop() == 0


def test_port_comes_from_the_port_variable(tmp_path: Path) -> None:
    server = ServerProcess(
        base_env(DATABASE_PATH=str(tmp_path / "flags.db")), port_from_env=True, log_path=str(tmp_path / "log")
    ).start()  # start() waits for /health on the port PORT names
    try:
        assert server.api().get("/api/admin/projects").status == 200
    finally:
        assert server.stop() == 0


def test_the_sqlite_file_is_where_the_settings_say(tmp_path: Path) -> None:
    # DATABASE_URL unset: DATABASE_PATH, or --database, which wins; `sqlite:///path` works as a URL too.
    cases = [
        ({"DATABASE_PATH": str(tmp_path / "env" / "flags.db")}, [], tmp_path / "env" / "flags.db"),
        ({"DATABASE_PATH": str(tmp_path / "ignored.db")}, ["--database", str(tmp_path / "flag.db")],
         tmp_path / "flag.db"),
        ({"DATABASE_URL": f"sqlite:///{tmp_path / 'url.db'}"}, [], tmp_path / "url.db"),
    ]  # fmt: skip
    for env, args, expected in cases:
        name = unique("where")
        server = ServerProcess(base_env(**env), args=args, log_path=str(tmp_path / "log")).start()
        try:
            server.api().create_feature(name)
        finally:
            assert server.stop() == 0
        assert _applied_versions({"DATABASE_PATH": str(expected)}) == [m.version for m in MIGRATIONS]
        database = _database({"DATABASE_PATH": str(expected)})
        try:
            with database.transaction(read_only=True) as tx:
                assert tx.one("SELECT name FROM features WHERE name = ?", (name,)) is not None
        finally:
            database.close()
    assert not (tmp_path / "ignored.db").exists()


def test_default_settings() -> None:
    # What `flagproxy server` uses with nothing set: port 4242 and the SQLite file flagproxy.db.
    settings = ServerSettings.load({}, [])
    assert (settings.port, settings.database_url, settings.database_path) == (4242, None, "flagproxy.db")
    finished = subprocess.run(
        [sys.executable, "-m", "flagproxy", "server", "--help"], capture_output=True, text=True, timeout=30
    )
    assert finished.returncode == 0 and "default 4242" in finished.stdout


def _run_server(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flagproxy", "server", *args],
        env={**env, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_bad_settings_stop_the_server_at_start(tmp_path: Path) -> None:
    database = str(tmp_path / "x.db")
    # Each case would otherwise start on port 1, which the test does not expect to be reached.
    cases = [
        ({"INIT_ADMIN_API_TOKENS": "no-format", "PORT": "1"}, "INIT_ADMIN_API_TOKENS"),
        ({"INIT_CLIENT_API_TOKENS": "default:*.secret", "PORT": "1"}, "INIT_CLIENT_API_TOKENS"),
        ({"PORT": "http"}, "PORT"),
        ({"PORT": "70000"}, "PORT"),
        ({"DATABASE_URL": "mysql://x", "PORT": "1"}, "DATABASE_URL"),
    ]
    for env, named in cases:
        finished = _run_server({"DATABASE_PATH": database, **env})
        assert finished.returncode == 2, finished.stderr
        assert named in finished.stderr


def test_init_token_for_an_unknown_environment_stops_the_server(tmp_path: Path) -> None:
    env = {"DATABASE_PATH": str(tmp_path / "x.db"), "INIT_CLIENT_API_TOKENS": "default:staging.secret"}
    finished = _run_server(env, "--port", str(free_port()))
    assert finished.returncode != 0
    assert "staging" in finished.stderr


def test_init_token_for_an_unknown_environment_stops_several_workers_with_one_line(tmp_path: Path) -> None:
    # Checked once in the main process, before any worker starts: one line, exit 2, no worker tracebacks.
    env = {"DATABASE_PATH": str(tmp_path / "x.db"), "INIT_CLIENT_API_TOKENS": "default:staging.secret"}
    finished = _run_server(env, "--port", str(free_port()), "--workers", "2")
    assert finished.returncode == 2, finished.stderr
    assert finished.stderr.strip().splitlines() == [
        "flagproxy server: INIT_CLIENT_API_TOKENS: no environment 'staging'"
    ]


def _open_and_migrate(path: str, barrier: Any, outcomes: Any) -> None:
    barrier.wait()
    database = SqliteDatabase(path)
    try:
        migrate(database)
        outcomes.put("ok")
    except Exception as exc:
        outcomes.put(repr(exc))
    finally:
        database.close()


def test_processes_opening_one_new_sqlite_file_together_all_succeed(tmp_path: Path) -> None:
    # What `flagproxy server --workers N` met on a fresh database: switching the new file to WAL needs it to
    # itself, and SQLite answers "database is locked" at once (no busy wait) when another process opens it
    # too. Before the fix about 4 rounds in 10 failed; each round here is three processes at one barrier.
    outcomes: list[str] = []
    for round_number in range(10):
        path = str(tmp_path / f"round-{round_number}.db")
        barrier = multiprocessing.Barrier(3)
        queue: Any = multiprocessing.Queue()
        openers = [
            multiprocessing.Process(target=_open_and_migrate, args=(path, barrier, queue)) for _ in range(3)
        ]
        for opener in openers:
            opener.start()
        outcomes += [queue.get(timeout=60) for _ in openers]
        for opener in openers:
            opener.join(timeout=60)
    assert outcomes == ["ok"] * 30


def test_several_workers_share_one_database(backend: str, backend_env: Fresh, tmp_path: Path) -> None:
    env = base_env(**backend_env(backend), LOG_LEVEL="info")
    log = tmp_path / "workers.log"
    server = ServerProcess(env, args=["--workers", "2"], log_path=str(log)).start()
    try:
        # /health answers as soon as one worker is up; wait for both, so both take requests below.
        deadline = time.monotonic() + 30
        while log.read_text().count("Worker ready") < 2:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        api = server.api()
        names = [unique("w") for _ in range(6)]
        for name in names:
            api.create_feature(name)
            # Whichever worker answers, it serves what any worker wrote.
            served = {f["name"] for f in api.client_features()["features"]}
            assert name in served
        assert {f["name"] for f in api.client_features()["features"]} >= set(names)
    finally:
        exit_code = server.stop()
    assert exit_code == 0, log.read_text()  # SIGTERM right after the last worker is up: a clean stop


def test_sigterm_while_workers_start_stops_the_server_cleanly(tmp_path: Path) -> None:
    # Sanic's manager alone waits 30 s for startup acknowledgements that never come
    # (flagproxy/http/serving.py).
    log = tmp_path / "workers.log"
    command = [sys.executable, "-m", "flagproxy", "server", "--port", str(free_port()), "--workers", "2"]
    env = {**os.environ, **base_env(DATABASE_PATH=str(tmp_path / "flags.db"), LOG_LEVEL="info")}
    with log.open("wb") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while "Starting worker" not in log.read_text():  # a worker is starting; none has acknowledged yet
        assert time.monotonic() < deadline and process.poll() is None, log.read_text()
        time.sleep(0.01)
    assert terminate(process) == 0, log.read_text()
    # A worker stopped while it starts (its app still being built) stops quietly once started.
    assert "Traceback" not in log.read_text(), log.read_text()


def test_workers_say_nothing_at_the_default_log_level(tmp_path: Path) -> None:
    # LOG_LEVEL defaults to warn: Sanic's "Starting worker [pid]" (info) was printed by every worker of
    # --workers N, logged before the worker's app had set the level.
    log = tmp_path / "workers.log"
    server = ServerProcess(
        base_env(DATABASE_PATH=str(tmp_path / "flags.db")), ["--workers", "2"], log_path=str(log)
    )
    server.start()
    assert server.stop() == 0, log.read_text()
    assert log.read_text() == ""
