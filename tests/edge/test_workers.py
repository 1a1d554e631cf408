"""`flagproxy edge --workers N` behaves as one instance: connections spread over the workers, one
`/edge/validate` per new token, one revision on every worker, one usage stream, replaced workers, clean
stops (flagproxy/edge/leader.py, feeds.py, scopes.py; flagproxy/instance/).

Real `flagproxy edge --workers 2` processes, each in a process group of its own, against the counting
upstream (tests/edge/harness.py, which records every call) or a real `flagproxy server`. Which worker
answered a connection is read from /proc, so the edge runs exactly as in production.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from flagproxy.sync.spool import HANDOFF_SECONDS
from tests.edge.conftest import DEV_CLIENT as SERVER_DEV_CLIENT
from tests.edge.conftest import DEV_FRONTEND as SERVER_DEV_FRONTEND
from tests.edge.harness import CountingUpstream, EdgeProcess, edge, features_doc
from tests.http.processes import ask_worker, listening_workers, stop_group_under_load, wait_until_listening
from tests.server.harness import ServerProcess, base_env

pytestmark = pytest.mark.slow

CLIENT = "*:development.workers-sync-secret"
FRONTEND = "*:development.workers-frontend-secret"
WORKERS = 2


def bucket(yes: int) -> dict[str, Any]:
    toggles = {"f": {"yes": yes, "no": 0}}
    return {"appName": "web", "instanceId": "i-1", "bucket": {"start": "2026-01-01T00:00:00Z",
            "stop": "2026-01-01T00:00:01Z", "toggles": toggles}}  # fmt: skip


def ask(process: EdgeProcess, method: str, path: str, token: str, body: Any = None) -> tuple:
    """(status, headers, body, pid of the worker that answered), on a new connection."""
    return ask_worker(
        process, method, path, {"Authorization": token}, None if body is None else json.dumps(body)
    )


def wait_until(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def usage_total(counting: CountingUpstream) -> int:
    """Every `yes` of every metrics batch the upstream took."""
    return sum(
        metric["yes"]
        for post in counting.received("/api/client/metrics/bulk")
        for metric in post["body"]["metrics"]
    )


def post_usage_on_every_worker(process: EdgeProcess, count: int) -> int:
    """POST one counted `yes` `count` times (more until every worker answered some); how many sent."""
    answered: set[int | None] = set()
    sent = 0
    while sent < count or len(answered - {None}) < WORKERS:
        status, _, body, worker = ask(process, "POST", "/api/frontend/client/metrics", FRONTEND, bucket(1))
        assert status == 202, body
        answered.add(worker)
        sent += 1
    return sent


@pytest.fixture
def stub(counting: CountingUpstream) -> CountingUpstream:
    counting.add(CLIENT, "client", "development", ["*"], features_doc(("f", "default", True)))
    counting.add(FRONTEND, "frontend", "development", ["*"])
    return counting


def start(stub: CountingUpstream, *extra: str) -> EdgeProcess:
    process = edge(stub.url, [CLIENT], "--workers", str(WORKERS), *extra)
    process.wait_ready()
    wait_until_listening(process, WORKERS)
    return process


@pytest.fixture
def running(stub: CountingUpstream) -> Iterator[EdgeProcess]:
    process = start(stub, "--metrics-interval-seconds", "1")
    yield process
    process.stop(signal.SIGTERM)


def test_connections_spread_over_every_worker_and_the_upstream_sees_one_instance(running, stub):
    answered: dict[int, int] = {}
    for _ in range(40):
        status, _, _, worker = ask(running, "GET", "/api/frontend", FRONTEND)
        assert status == 200
        if worker is not None:
            answered[worker] = answered.get(worker, 0) + 1
    assert set(answered) == listening_workers(running), answered
    assert all(n >= 5 for n in answered.values()), answered  # the kernel spreads them, not one takes all
    # One feed poll per refresh interval (1 s) for the whole instance, not one per worker.
    polls_before = len(stub.received("/api/client/features"))
    time.sleep(3.0)
    polls = len(stub.received("/api/client/features")) - polls_before
    assert 2 <= polls <= 4, polls


def test_a_new_token_is_validated_once_for_every_worker(running, stub):
    stub.validate_delay = 0.5  # every request for the new tokens arrives while the first is asked about
    tokens = [stub.add(f"*:development.new-{n}", "frontend", "development", ["*"]) for n in range(3)]
    invalid = "*:development.never-issued"
    answers: list[tuple[str, int, int | None]] = []

    def call(token: str) -> None:
        status, _, _, worker = ask(running, "GET", "/api/frontend", token)
        answers.append((token, status, worker))

    threads = [threading.Thread(target=call, args=(t,)) for t in [*tokens, invalid] for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    expected = sorted([*((t, 200) for t in tokens), (invalid, 403)])
    assert sorted({(t, s) for t, s, _ in answers}) == expected, answers
    assert {w for _, _, w in answers} - {None} == listening_workers(running), answers  # both asked
    for token in [*tokens, invalid]:
        assert stub.asked.count(token) == 1, (token, stub.asked)
    # Later requests on any worker are answered from the cache: the upstream is not asked again.
    calls = stub.validate_calls
    for token in [*tokens, invalid] * 4:
        ask(running, "GET", "/api/frontend", token)
    assert stub.validate_calls == calls, stub.asked
    _, _, body, _ = ask(running, "GET", "/internal-backstage/metrics", FRONTEND)
    # The leader's count, whichever worker answers: every call but the command's check of --tokens, made
    # before the instance starts.
    assert f"edge_token_validation_requests_total {calls - 1}" in body.decode()


def test_a_token_revoked_upstream_stops_working_on_every_worker(stub):
    process = start(stub, "--token-revalidation-interval-seconds", "1")
    try:
        revoked = stub.add("*:development.revoked-later", "frontend", "development", ["*"])

        def statuses_by_worker() -> dict[int, int]:
            found: dict[int, int] = {}
            deadline = time.monotonic() + 10
            while len(found) < WORKERS:
                assert time.monotonic() < deadline, f"only {sorted(found)} answered"
                status, _, _, worker = ask(process, "GET", "/api/frontend", revoked)
                if worker is not None:
                    found[worker] = status
            return found

        assert set(statuses_by_worker().values()) == {200}  # each worker knows it now
        del stub.tokens[revoked]
        deadline = time.monotonic() + 15
        while set(statuses_by_worker().values()) != {403}:
            assert time.monotonic() < deadline, "a worker still accepts the revoked token"
            time.sleep(0.2)
    finally:
        output = process.stop(signal.SIGTERM)
    assert process.popen.returncode == 0 and "Traceback" not in "".join(output), output


def test_usage_from_every_worker_arrives_once(running, stub):
    sent = post_usage_on_every_worker(running, 30)
    wait_until(lambda: usage_total(stub) == sent, 10, "usage never arrived in full")
    time.sleep(2.5)  # two more send intervals: nothing is sent twice
    assert usage_total(stub) == sent
    # Only the leader posts: with a 1 s interval, a handful of batches, not one per worker and interval.
    tokens = {post["token"] for post in stub.received("/api/client/metrics/bulk")}
    assert tokens == {CLIENT}
    scraped = ask(running, "GET", "/internal-backstage/metrics", "")[2].decode()
    (sample,) = [line for line in scraped.splitlines() if line.startswith("edge_usage_batches_sent_total ")]
    assert 1 <= float(sample.split()[1]) <= len(stub.received("/api/client/metrics/bulk"))


@pytest.fixture
def own_server(tmp_path) -> Iterator[ServerProcess]:
    """A flag server of this test's own: the session's is shared by tests that list its flags."""
    process = ServerProcess(
        base_env(DATABASE_PATH=str(tmp_path / "flags.db")), log_path=str(tmp_path / "log")
    )
    process.start()
    yield process
    assert process.stop() == 0


def test_every_worker_serves_the_same_revision_after_a_change(own_server: ServerProcess) -> None:
    admin = own_server.api()
    flag = "workers-revision-flag"
    strategy = {"name": "default", "constraints": [], "parameters": {}}
    admin.create_feature(flag, "default")
    admin.add_strategy(flag, strategy, "development", "default")
    process = edge(own_server.url, [SERVER_DEV_CLIENT], "--workers", str(WORKERS))
    try:
        process.wait_ready()
        wait_until_listening(process, WORKERS)

        def answers_by_worker(accept: Any) -> dict[int, tuple[str, bytes]]:
            found: dict[int, tuple[str, bytes]] = {}
            deadline = time.monotonic() + 15
            while len(found) < WORKERS:
                assert time.monotonic() < deadline, f"only workers {sorted(found)} answered as expected"
                status, headers, body, worker = ask(process, "GET", "/api/frontend", SERVER_DEV_FRONTEND)
                assert status == 200
                if worker is not None and accept(body):
                    found[worker] = (headers["etag"], body)
            return found

        before = answers_by_worker(lambda body: flag.encode() not in body)
        assert len(set(before.values())) == 1  # one revision, byte for byte
        admin.switch(flag, True, "development", "default")
        after = answers_by_worker(lambda body: flag.encode() in body)
        assert len(set(after.values())) == 1  # identical bytes and ETags on both workers
        assert set(after.values()) != set(before.values())
        revisions: dict[int, int] = {}  # each worker's revision of the feed, as its backstage says
        while len(revisions) < WORKERS:
            _, _, body, worker = ask(process, "GET", "/internal-backstage/features", SERVER_DEV_FRONTEND)
            if worker is not None:
                revisions[worker] = json.loads(body)["development:*"]["revision"]
        assert len(set(revisions.values())) == 1, revisions
    finally:
        output = process.stop(signal.SIGTERM)
    assert process.popen.returncode == 0 and "Traceback" not in "".join(output), output


@pytest.mark.parametrize("to_group", [True, False], ids=["group", "main"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_exits_0_with_every_worker_s_usage_flushed(stub, signum, to_group):
    process = start(stub, "--metrics-interval-seconds", "600")  # the only send is the stop's
    sent = post_usage_on_every_worker(process, 20)
    if to_group:
        os.killpg(process.popen.pid, signum)
    else:
        os.kill(process.popen.pid, signum)
    stdout, stderr = process.popen.communicate(timeout=30)
    assert process.popen.returncode == 0, stderr
    assert "Traceback" not in stdout + stderr, stdout + stderr
    assert len(stub.received("/api/client/metrics/bulk")) == 1
    assert usage_total(stub) == sent


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_to_the_process_group_under_load_finishes_every_answer(stub, signum):
    """As the proxy's (tests/http/test_workers.py): SDKs keep posting usage while the whole group is
    signalled; every request the edge accepted is answered whole, the exit is 0, and every accepted count
    arrives upstream once, in the one batch the stop sends."""
    process = start(stub, "--metrics-interval-seconds", "600")  # the only send is the stop's
    outcomes, problems, output = stop_group_under_load(
        process,
        signum,
        lambda: ask(process, "POST", "/api/frontend/client/metrics", FRONTEND, bucket(1)),
        202,
    )
    assert problems == [], (problems, outcomes)
    assert outcomes["ok"] > 50, outcomes
    assert process.popen.returncode == 0, (outcomes, output)
    assert "Traceback" not in output, output
    assert len(stub.received("/api/client/metrics/bulk")) == 1
    assert usage_total(stub) == outcomes["ok"], outcomes


def test_each_environment_has_one_feed_whatever_the_number_of_workers(stub):
    """Two client tokens of two environments: each environment's features are polled by one feed for the
    whole instance (one poll per refresh interval), not one per worker."""
    production = stub.add(
        "*:production.workers-prod-sync", "client", "production", ["*"], features_doc(("p", "default", True))
    )
    process = edge(stub.url, [CLIENT, production], "--workers", str(WORKERS))
    try:
        process.wait_ready()
        wait_until_listening(process, WORKERS)

        def polls(token: str) -> int:
            return len([r for r in stub.received("/api/client/features") if r["token"] == token])

        before = {token: polls(token) for token in (CLIENT, production)}
        time.sleep(3.0)
        counted = {token: polls(token) - before[token] for token in before}
        assert all(2 <= n <= 4 for n in counted.values()), counted  # N workers each polling: 2N x as many
    finally:
        output = process.stop(signal.SIGTERM)
    assert process.popen.returncode == 0 and "Traceback" not in "".join(output), output


def test_a_killed_worker_is_replaced_and_its_usage_arrives(stub):
    process = start(stub, "--metrics-interval-seconds", "600")
    try:
        expected = ask(process, "GET", "/api/frontend", FRONTEND)[2]
        sent = post_usage_on_every_worker(process, 20)
        time.sleep(HANDOFF_SECONDS * 2)  # a worker killed outright loses what it did not hand over yet
        before = listening_workers(process)
        os.kill(min(before), signal.SIGKILL)
        wait_until(lambda: len(listening_workers(process) - before) == 1, 20, "no replacement")
        (replacement,) = listening_workers(process) - before
        served = 0
        deadline = time.monotonic() + 10
        while served < 3:  # its first answers are the instance's revision: never a 503
            assert time.monotonic() < deadline, "no connection reached the replacement"
            status, _, body, worker = ask(process, "GET", "/api/frontend", FRONTEND)
            assert (status, body) == (200, expected)
            served += worker == replacement
        sent += post_usage_on_every_worker(process, 10)
    finally:
        output = process.stop(signal.SIGTERM)
    assert process.popen.returncode == 0 and "Traceback" not in "".join(output), output
    assert usage_total(stub) == sent


def test_workers_stop_when_the_main_process_is_killed(stub):
    process = start(stub)
    os.kill(process.popen.pid, signal.SIGKILL)
    try:
        wait_until(lambda: not listening_workers(process), 10, "workers outlived their main process")
    finally:
        process.stop()


def test_dynamic_mode_starts_one_feed_for_every_worker(stub):
    other = stub.add(
        "*:production.workers-prod", "client", "production", ["*"], features_doc(("p", "d", True))
    )
    process = edge(stub.url, [], "--dynamic", "--workers", str(WORKERS))
    try:
        process.wait_ready()
        wait_until_listening(process, WORKERS)
        answers: list[tuple[int, int | None]] = []

        def call() -> None:
            status, _, _, worker = ask(process, "GET", "/api/client/features", other)
            answers.append((status, worker))

        threads = [threading.Thread(target=call) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert {status for status, _ in answers} == {200}
        assert stub.asked.count(other) == 1
        # One feed: one poll per refresh interval with that token, whatever the number of workers.
        polls_before = len([r for r in stub.received("/api/client/features") if r["token"] == other])
        time.sleep(3.0)
        polls = len([r for r in stub.received("/api/client/features") if r["token"] == other]) - polls_before
        assert 2 <= polls <= 4, polls
    finally:
        output = process.stop(signal.SIGTERM)
    assert process.popen.returncode == 0 and "Traceback" not in "".join(output), output


def test_offline_mode_with_workers_serves_one_file_revision_everywhere(tmp_path):
    path = tmp_path / "features.json"
    path.write_text(json.dumps(features_doc(("first", "default", True))))
    process = EdgeProcess(
        ["offline", "--bootstrap-file", str(path), "--tokens", FRONTEND, "--reload-interval", "1",
         "--workers", str(WORKERS)]
    )  # fmt: skip
    try:
        process.wait_ready()
        wait_until_listening(process, WORKERS)

        def by_worker(flag: str) -> set[bytes]:
            found: dict[int, bytes] = {}
            deadline = time.monotonic() + 15
            while len(found) < WORKERS:
                assert time.monotonic() < deadline, f"only {sorted(found)} serve {flag}"
                status, _, body, worker = ask(process, "GET", "/api/frontend", FRONTEND)
                assert status == 200
                if worker is not None and flag.encode() in body:
                    found[worker] = body
            return set(found.values())

        assert len(by_worker("first")) == 1
        path.write_text(json.dumps(features_doc(("second", "default", True))))
        assert len(by_worker("second")) == 1
    finally:
        output = process.stop(signal.SIGTERM)
    assert process.popen.returncode == 0 and "Traceback" not in "".join(output), output
