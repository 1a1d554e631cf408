"""`GET /api/client/streaming`: unleash-connected then unleash-updated per change, scoped by token,
Last-Event-ID replay, keep-alive, fetch-mode beyond MAX_STREAMS, changes committed through one process
reaching the streams of others on the same database (PostgreSQL LISTEN/NOTIFY, SQLite polling), the
PostgreSQL listener coming back after its connection is lost, and a clean stop with open streams (on
SQLite and PostgreSQL)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.server.harness import (
    CLIENT_TOKEN,
    DEFAULT_PROJECT_CLIENT_TOKEN,
    PROD_CLIENT_TOKEN,
    PostgresDatabases,
    ServerProcess,
    base_env,
    terminate,
    unique,
)
from tests.server.sse import SseStream


@contextmanager
def stream(
    server: ServerProcess, token: str = CLIENT_TOKEN, query: str = "", **headers: str
) -> Iterator[SseStream]:
    opened = SseStream(server.port, token, f"/api/client/streaming{query}", **headers)
    try:
        yield opened
    finally:
        opened.close()


def updated_names(data: dict[str, Any]) -> list[str]:
    return [e["feature"]["name"] for e in data["events"] if e["type"] == "feature-updated"]


def connected(opened: SseStream) -> dict[str, Any]:
    assert opened.status == 200 and opened.headers["content-type"].startswith("text/event-stream")
    first = opened.next()
    assert first.event == "unleash-connected"
    return first.json()


def next_update(opened: SseStream, prefix: str) -> tuple[str, dict[str, Any]]:
    """The next unleash-updated event about features named `prefix...` (others' changes skipped: the
    session's server is shared), with its SSE id."""
    while True:
        event = opened.next()
        assert event.event == "unleash-updated", event
        data = event.json()
        assert event.id == str(data["events"][-1]["eventId"])
        if any(name.startswith(prefix) for name in updated_names(data)):
            return event.id, data


def updates(opened: SseStream, prefix: str, count: int) -> list[dict[str, Any]]:
    """The next `count` feature-updated events about `prefix...`, whichever messages carry them (changes
    committed close together may come in one message)."""
    found: list[dict[str, Any]] = []
    while len(found) < count:
        _, data = next_update(opened, prefix)
        found += [
            e
            for e in data["events"]
            if e["type"] == "feature-updated" and e["feature"]["name"].startswith(prefix)
        ]
    assert len(found) == count, found
    return found


def test_connected_then_each_change_in_order(server: ServerProcess) -> None:
    api = server.api()
    prefix = unique("stream")
    with stream(server) as opened:
        hydration = connected(opened)
        assert [e["type"] for e in hydration["events"]] == ["hydration"]
        api.create_feature(f"{prefix}-a")
        api.switch(f"{prefix}-a", True)
        api.create_feature(f"{prefix}-b")
        seen = updates(opened, prefix, 3)
    ids = [event["eventId"] for event in seen]
    assert ids == sorted(ids) and len(set(ids)) == 3 and ids[0] > hydration["events"][0]["eventId"]
    assert [event["feature"]["name"] for event in seen] == [f"{prefix}-a", f"{prefix}-a", f"{prefix}-b"]
    assert seen[1]["feature"]["enabled"] is True
    # The same events /api/client/delta gives for the same revisions.
    replay = api.get(
        f"/api/client/delta?namePrefix={prefix}",
        token=CLIENT_TOKEN,
        headers={"If-None-Match": f'"{hydration["events"][0]["eventId"]}"'},
    ).json()
    assert replay["events"] == seen


def test_scoped_by_token(server: ServerProcess) -> None:
    api = server.api()
    project = unique("sproj")
    assert api.post("/api/admin/projects", {"id": project, "name": "P"}).status == 201
    prefix = unique("scoped")
    with (
        stream(server, DEFAULT_PROJECT_CLIENT_TOKEN) as default_only,
        stream(server, PROD_CLIENT_TOKEN) as prod,
    ):
        connected(default_only)
        connected(prod)
        api.create_feature(f"{prefix}-elsewhere", project=project)
        api.switch(f"{prefix}-elsewhere", True, project=project)  # development
        api.create_feature(f"{prefix}-default")
        _, data = next_update(default_only, prefix)
        assert updated_names(data) == [f"{prefix}-default"]  # the other project's changes never came
        _, first = next_update(prod, prefix)
        _, second = next_update(prod, prefix)
        assert (
            updated_names(first) == [f"{prefix}-elsewhere"]
            and first["events"][0]["feature"]["enabled"] is False
        )
        assert updated_names(second) == [f"{prefix}-default"]  # the development switch never came


def test_last_event_id_replays_what_was_missed(server: ServerProcess) -> None:
    api = server.api()
    prefix = unique("replay")
    with stream(server) as opened:
        connected(opened)
        api.create_feature(f"{prefix}-a")
        last_id, _ = next_update(opened, prefix)
    api.create_feature(f"{prefix}-b")
    api.switch(f"{prefix}-b", True)
    with stream(server, last_event_id=last_id) as again:
        first = again.next()
        assert first.event == "unleash-connected"
        replayed = [e for e in first.json()["events"] if e["feature"]["name"].startswith(prefix)]
        assert [(e["type"], e["feature"]["name"], e["feature"]["enabled"]) for e in replayed] == [
            ("feature-updated", f"{prefix}-b", False),
            ("feature-updated", f"{prefix}-b", True),
        ]
        assert first.id == str(first.json()["events"][-1]["eventId"])
        caught_up = first.id
    with stream(server, query=f"?namePrefix={unique('none')}", last_event_id=caught_up) as nothing_missed:
        # Nothing newer for this reader: an empty document, no id.
        first = nothing_missed.next()
        if first.json()["events"]:  # another test's change landed meanwhile: it must be newer
            assert all(e["eventId"] > int(caught_up) for e in first.json()["events"])
        else:
            assert first.id is None
    with stream(server, last_event_id="999999999999") as unknown:
        assert [e["type"] for e in unknown.next().json()["events"]] == ["hydration"]


# The official Python SDK reads its stream with a 30 s timeout (UnleashClient's `request_timeout`): an idle
# stream must send something sooner, or the SDK drops it, reconnects, and its backoff grows each time.
PYTHON_SDK_READ_TIMEOUT = 30.0


def test_an_idle_stream_sends_keep_alive_comments_within_the_sdks_read_timeout(server: ServerProcess) -> None:
    with stream(server, PROD_CLIENT_TOKEN) as opened:
        connected(opened)
        comments = 0
        while comments < 2:  # two in a row: the gap between them is the period (changes may come between)
            event = opened.next(PYTHON_SDK_READ_TIMEOUT - 1, comments=True)
            if event.event is None:
                assert event.data == "keep-alive"
                comments += 1


def _servers(env: dict[str, str], tmp_path: Path, count: int, **extra: str) -> list[ServerProcess]:
    return [
        ServerProcess(base_env(**env, **extra), log_path=str(tmp_path / f"server-{index}.log")).start()
        for index in range(count)
    ]


def test_a_change_through_one_process_reaches_the_streams_of_another(
    backend: str, backend_env: Callable[[str], dict[str, str]], tmp_path: Path
) -> None:
    # Two servers on one database: PostgreSQL tells the other through NOTIFY, SQLite's readers poll.
    first, second = _servers(backend_env(backend), tmp_path, 2)
    try:
        with stream(second) as on_second, stream(first) as on_first:
            connected(on_second)
            connected(on_first)
            for index in range(3):
                writer = (first, second)[index % 2]
                writer.api().create_feature(f"cross-{index}")
            for opened in (on_second, on_first):
                names = [e["feature"]["name"] for e in updates(opened, "cross-", 3)]
                assert names == ["cross-0", "cross-1", "cross-2"]
    finally:
        assert [server.stop() for server in (first, second)] == [0, 0]


def _listeners(database_url: str) -> set[int]:
    """The backends of the database waiting in LISTEN (a feed's listening connection shows its last query)."""
    with psycopg.connect(database_url, autocommit=True) as connection:
        rows = connection.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%'"
        ).fetchall()
    return {row[0] for row in rows}


def _until(found: Callable[[], set[int]], holds: Callable[[set[int]], bool]) -> set[int]:
    for _ in range(300):
        value = found()
        if holds(value):
            return value
        time.sleep(0.1)
    raise AssertionError(f"never held; last seen {value}")


KILL_LISTENERS = "query LIKE 'LISTEN%'"
KILL_EVERY_BACKEND = "pid <> pg_backend_pid()"  # as a PostgreSQL restart would: pooled connections too


@pytest.mark.postgres
@pytest.mark.parametrize("which", [KILL_LISTENERS, KILL_EVERY_BACKEND], ids=["listeners", "every-backend"])
def test_the_listener_comes_back_after_its_connection_is_lost(
    which: str, postgres_databases: PostgresDatabases, tmp_path: Path
) -> None:
    url = postgres_databases.create()
    first, second = _servers({"DATABASE_URL": url}, tmp_path, 2)
    try:
        with stream(second) as on_second:
            connected(on_second)
            listening = _until(lambda: _listeners(url), lambda pids: len(pids) == 2)  # one per server
            with psycopg.connect(url, autocommit=True) as connection:
                killed = connection.execute(
                    "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity"
                    f" WHERE datname = current_database() AND {which}"
                ).fetchall()
            assert listening <= {pid for pid, done in killed if done}
            # Each server listens again on a new connection (not only its slow safety read of the table).
            _until(lambda: _listeners(url), lambda pids: len(pids) == 2 and not pids & listening)
            for index in range(3):
                first.api().create_feature(f"relisten-{index}")
            names = [e["feature"]["name"] for e in updates(on_second, "relisten-", 3)]
            assert names == ["relisten-0", "relisten-1", "relisten-2"]
        assert "listening on PostgreSQL failed" in Path(tmp_path / "server-1.log").read_text()
    finally:
        assert [server.stop() for server in (first, second)] == [0, 0]


def test_workers_stream_every_change(
    backend: str, backend_env: Callable[[str], dict[str, str]], tmp_path: Path
) -> None:
    server = ServerProcess(
        base_env(**backend_env(backend)), args=["--workers", "2"], log_path=str(tmp_path / "s.log")
    ).start()
    try:
        opened = [SseStream(server.port, CLIENT_TOKEN) for _ in range(6)]  # spread over both workers
        for each in opened:
            connected(each)
        for index in range(2):
            server.api().create_feature(f"workers-{index}")
        for each in opened:
            assert [e["feature"]["name"] for e in updates(each, "workers-", 2)] == ["workers-0", "workers-1"]
            each.close()
    finally:
        assert server.stop() == 0


def test_beyond_max_streams_clients_are_asked_to_poll(
    backend: str, backend_env: Callable[[str], dict[str, str]], tmp_path: Path
) -> None:
    (server,) = _servers(backend_env(backend), tmp_path, 1, MAX_STREAMS="2")
    try:
        with stream(server) as one, stream(server) as two:
            connected(one)
            connected(two)
            with stream(server) as three:
                assert three.status == 200 and three.headers["fetch-mode"] == "polling"
                hint = three.next()
                assert (hint.event, hint.data) == ("fetch-mode", "polling")
                assert three.ends()
            # The others go on.
            server.api().create_feature("limit-a")
            assert [e["feature"]["name"] for e in updates(one, "limit-", 1)] == ["limit-a"]
        # Both hung up: their places are free again (once the server has seen them go).
        for _ in range(200):
            with stream(server) as again:
                if "fetch-mode" not in again.headers:
                    assert connected(again)["events"][0]["type"] == "hydration"
                    break
        else:
            raise AssertionError("streams closed by their clients were never released")
    finally:
        assert server.stop() == 0


def test_open_streams_end_on_sigterm_and_the_server_exits_0(
    backend: str, backend_env: Callable[[str], dict[str, str]], tmp_path: Path
) -> None:
    (server,) = _servers(backend_env(backend), tmp_path, 1)
    opened = [SseStream(server.port, CLIENT_TOKEN) for _ in range(3)]
    for each in opened:
        connected(each)
    assert server.process is not None
    # Streams do not hold the stop: well before Sanic's 15 s graceful limit, or it is killed (-9).
    assert terminate(server.process, timeout=10) == 0
    for each in opened:
        assert each.ends()
        each.close()


def _stream_series(server: ServerProcess) -> tuple[float, float]:
    """(connected stream clients, stream messages sent) over every worker, from a Prometheus scrape."""
    from prometheus_client.parser import text_string_to_metric_families

    answer = server.api(None).get("/internal-backstage/prometheus")  # no token, as Unleash's
    assert answer.status == 200 and answer.headers["content-type"].startswith("text/plain")
    samples = {
        sample.name: sample.value
        for family in text_string_to_metric_families(answer.body.decode())
        for sample in family.samples
    }
    return samples["flagproxy_delta_streams"], samples["flagproxy_delta_stream_messages_total"]


def _until_series(server: ServerProcess, wanted: tuple[float, float]) -> None:
    deadline = time.monotonic() + 30  # the workers write their samples every quarter second
    while (seen := _stream_series(server)) != wanted:
        assert time.monotonic() < deadline, seen
        time.sleep(0.1)


def test_the_series_count_stream_clients_and_events_sent_over_every_worker(
    backend_env: Callable[[str], dict[str, str]], tmp_path: Path
) -> None:
    server = ServerProcess(
        base_env(**backend_env("sqlite")), args=["--workers", "2"], log_path=str(tmp_path / "s.log")
    ).start()
    try:
        assert _stream_series(server) == (0, 0)
        opened = [SseStream(server.port, CLIENT_TOKEN) for _ in range(4)]  # spread over both workers
        for each in opened:
            connected(each)
        _until_series(server, (4, 4))
        server.api().create_feature("series-a")
        for each in opened:
            assert [e["feature"]["name"] for e in updates(each, "series-", 1)] == ["series-a"]
        _until_series(server, (4, 8))
        for each in opened:
            each.close()
        _until_series(server, (0, 8))  # clients gone: no longer counted, what was sent stays
    finally:
        assert server.stop() == 0
