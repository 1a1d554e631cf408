"""`flagproxy edge --redis-url`: Edge's keys in a real `redis-server` (Debian's, started here on a free
loopback port with nothing saved to disk, never the machine's own Redis), real edge processes and the
counting stub upstream (tests/edge/harness.py): a restart while the upstream is away is ready from Redis
and serves the tokens and flags it knew, with one worker or two; SIGTERM writes before exit 0; Redis going
away while the edge runs costs one log line; Edge's own entries are read; two feeds share their
environment's document; a password, a unix socket and TLS reach it, a wrong password costs one line;
cluster mode is refused.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis

from tests.edge.certificates import TestCA
from tests.edge.harness import (
    CountingUpstream,
    client_flag_names,
    edge,
    edge_written,
    features_doc,
    flag_names,
    serves_edge_written,
    wait_for,
)
from tests.http.loopback import free_port

CLIENT = "*:development.redis-client-secret"
FRONTEND = "*:development.redis-frontend-secret"
FLAGS = features_doc(("alpha", "default", True), ("beta", "other", True))


class RedisServer:
    """A `redis-server` of this test's own: no RDB, no AOF, loopback only."""

    def __init__(self, folder: Path, *extra: str, ca: TestCA | None = None) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}"
        self.socket = folder / "redis.sock"
        self.extra = extra  # more redis-server options (a password)
        self.ca = ca  # with a test CA: TLS only, with a certificate it signed
        if ca is not None:
            cert, key = ca.issue("redis")
            self.extra = (*extra, "--port", "0", "--tls-port", str(self.port), "--tls-cert-file", str(cert),
                          "--tls-key-file", str(key), "--tls-ca-cert-file", str(ca.ca_file),
                          "--tls-auth-clients", "no")  # fmt: skip
        self.password = extra[extra.index("--requirepass") + 1] if "--requirepass" in extra else None
        self.username: str | None = None
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        executable = shutil.which("redis-server")
        assert executable, "redis-server is missing: .ci/run installs Debian's redis-server"
        self.process = subprocess.Popen(
            [executable, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.folder), "--unixsocket", str(self.socket), *self.extra],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 20
        while True:
            try:
                if self.client().ping():
                    return
            except redis.exceptions.ConnectionError:
                assert self.process.poll() is None, "redis-server stopped"
                assert time.monotonic() < deadline, "redis-server did not answer"
                time.sleep(0.05)

    def client(self) -> redis.Redis:
        tls = {"ssl": True, "ssl_ca_certs": str(self.ca.ca_file)} if self.ca is not None else {}
        login = {"username": self.username, "password": self.password}
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5, **login, **tls)

    def start_as(self, username: str, password: str) -> None:
        """Start, then speak to it as this ACL user."""
        self.username, self.password = username, password
        self.start()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process = None

    def get_json(self, key: str) -> object:
        raw = self.client().get(key)
        return None if raw is None else orjson.loads(raw)


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    server.start()
    yield server
    server.kill()


@pytest.mark.parametrize("workers", [1, 2])
def test_a_restart_while_the_upstream_is_away_is_ready_from_redis(
    counting: CountingUpstream, redis_server: RedisServer, workers: int
) -> None:
    counting.add(CLIENT, "client", "development", ["*"], FLAGS)
    counting.add(FRONTEND, "frontend", "development", ["*"])
    options = ("--redis-url", redis_server.url, "--workers", str(workers))
    process = edge(counting.url, [CLIENT], *options)
    process.wait_ready()
    assert flag_names(process, FRONTEND) == {
        "alpha",
        "beta",
    }  # the frontend token is validated, so it is kept
    _, err = process.stop(signal.SIGTERM)
    assert process.popen.returncode == 0, err

    features = redis_server.get_json("unleash-features")
    assert isinstance(features, list) and [pair[0] for pair in features] == ["development"]
    assert {f["name"] for f in features[0][1]["features"]} == {"alpha", "beta"}
    tokens = redis_server.get_json("unleash-tokens")
    assert {(t["type"], t["environment"], t["status"]) for t in tokens} == {
        ("backend", "development", "Validated"),
        ("frontend", "development", "Validated"),
    }
    assert b"secret" not in redis_server.client().get("unleash-tokens")  # digests, never a secret
    event_ids = redis_server.get_json("unleash-last-event-ids")
    assert isinstance(event_ids, dict) and isinstance(event_ids["development"], int)

    url = counting.url
    counting.stop()
    process = edge(url, [CLIENT], *options)
    try:
        process.wait_ready()  # from Redis: the upstream is gone
        assert flag_names(process, FRONTEND) == {"alpha", "beta"}
        assert client_flag_names(process, CLIENT) == {"alpha", "beta"}
        assert process.get("/api/frontend", "*:development.never-seen")[0] == 401  # nobody to ask
        status, headers, _ = process.get("/api/client/delta", CLIENT)
        assert status == 200 and int(headers["etag"].strip('W/"')) >= event_ids["development"]
    finally:
        _, err = process.stop(signal.SIGTERM)
    assert process.popen.returncode == 0, err


def test_feeds_of_one_environment_share_its_document(
    counting: CountingUpstream, redis_server: RedisServer
) -> None:
    """Two client tokens of one environment, each of one project: two feeds, one `development` document in
    Redis holding both projects; after a restart with the upstream away each token sees its own project."""
    first, second = "default:development.redis-first", "other:development.redis-second"
    counting.add(first, "client", "development", ["default"], features_doc(("alpha", "default", True)))
    counting.add(second, "client", "development", ["other"], features_doc(("beta", "other", True)))
    process = edge(counting.url, [first, second], "--redis-url", redis_server.url)
    process.wait_ready()
    _, err = process.stop(signal.SIGTERM)
    assert process.popen.returncode == 0, err
    features = redis_server.get_json("unleash-features")
    assert [pair[0] for pair in features] == ["development"]
    assert {f["name"] for f in features[0][1]["features"]} == {"alpha", "beta"}
    assert features[0][1]["query"]["project"] == ["default", "other"]

    url = counting.url
    counting.stop()
    process = edge(url, [first, second], "--redis-url", redis_server.url)
    try:
        process.wait_ready()
        for token, name in ((first, "alpha"), (second, "beta")):
            status, _, body = process.get("/api/client/features", token)
            assert status == 200 and {f["name"] for f in orjson.loads(body)["features"]} == {name}
    finally:
        _, err = process.stop(signal.SIGTERM)
    assert process.popen.returncode == 0, err


@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_writes_to_redis_before_exit(
    counting: CountingUpstream, redis_server: RedisServer, workers: int
) -> None:
    counting.add(CLIENT, "client", "development", ["*"], FLAGS)
    process = edge(counting.url, [CLIENT], "--redis-url", redis_server.url, "--workers", str(workers))
    process.wait_ready()
    wait_for(lambda: redis_server.client().exists("unleash-features"), "the first write after a change")
    redis_server.client().flushall()  # nothing changes after this: only the stop's write puts them back
    _, err = process.stop(signal.SIGTERM)
    assert process.popen.returncode == 0, err
    features = redis_server.get_json("unleash-features")
    assert {f["name"] for f in features[0][1]["features"]} == {"alpha", "beta"}
    assert len(redis_server.get_json("unleash-tokens")) == 1


def test_redis_going_away_costs_one_log_line(counting: CountingUpstream, redis_server: RedisServer) -> None:
    counting.add(CLIENT, "client", "development", ["*"], FLAGS)
    counting.add(FRONTEND, "frontend", "development", ["*"])
    process = edge(counting.url, [CLIENT], "--redis-url", redis_server.url)
    try:
        process.wait_ready()
        wait_for(lambda: redis_server.client().exists("unleash-features"), "the first write")
        redis_server.kill()
        for name in ("gamma", "delta", "epsilon"):  # each change is a write that fails
            counting.documents[CLIENT] = features_doc(("alpha", "default", True), (name, "default", True))
            wait_for(lambda name=name: name in flag_names(process, FRONTEND), f"{name} served")
        assert process.popen.poll() is None
        redis_server.start()  # the same port, empty
        counting.documents[CLIENT] = features_doc(("alpha", "default", True), ("zeta", "default", True))
        wait_for(lambda: "zeta" in flag_names(process, FRONTEND), "zeta served")

        def written() -> bool:
            features = redis_server.get_json("unleash-features")
            return bool(features) and "zeta" in {f["name"] for f in features[0][1]["features"]}

        wait_for(written, "the write after Redis came back")
    finally:
        out, err = process.stop(signal.SIGTERM)
    assert process.popen.returncode == 0, err
    away = [line for line in out.splitlines() if "cannot be used" in line]
    assert len(away) == 1, out
    assert away[0].startswith("ERROR:") and redis_server.url in away[0]
    assert sum("answers again" in line for line in out.splitlines()) == 1, out


def test_edge_entries_are_read_and_a_feed_is_cut_to_its_projects(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """What Unleash Edge itself writes (its tokens with their secrets, an environment's features) serves a
    flagproxy edge whose upstream is away; a token of one project sees that project's flags only."""
    features, tokens = edge_written()
    redis_server.client().set("unleash-features", features)
    redis_server.client().set("unleash-tokens", tokens)
    serves_edge_written("--redis-url", redis_server.url)


def writes_through(counting: CountingUpstream, server: RedisServer, options: list[str], **kw: Any) -> str:
    """An edge with these Redis options gets ready and, at its stop, has written its flags to `server`
    without a word of trouble; what it printed."""
    process = edge(counting.url, [CLIENT], *options, **kw)
    try:
        process.wait_ready()
    finally:
        out, err = process.stop(signal.SIGTERM)
        stored = server.get_json("unleash-features")
        server.kill()
    assert process.popen.returncode == 0, err
    assert "cannot be used" not in out, out
    assert {f["name"] for f in stored[0][1]["features"]} == {"alpha", "beta"}
    return out + err


@pytest.mark.parametrize("how", ["host, port and password", "unix socket"])
def test_redis_options_reach_it(counting: CountingUpstream, tmp_path: Path, how: str) -> None:
    server = RedisServer(tmp_path, "--requirepass", "s3cr3t-pw")
    server.start()
    counting.add(CLIENT, "client", "development", ["*"], FLAGS)
    if how == "unix socket":
        options = ["--redis-url", f"unix://{server.socket}", "--redis-password", "s3cr3t-pw"]
    else:
        options = [
            "--redis-host",
            "127.0.0.1",
            "--redis-port",
            str(server.port),
            "--redis-password",
            "s3cr3t-pw",
        ]
    printed = writes_through(counting, server, [*options, "--log-level", "info"])
    assert "s3cr3t-pw" not in printed


def test_redis_username_reaches_an_acl_user(counting: CountingUpstream, tmp_path: Path) -> None:
    """--redis-username with --redis-password logs in as a Redis 6+ ACL user (the default user is off, so
    nothing else gets in)."""
    server = RedisServer(
        tmp_path, "--user", "default", "off", "--user", "edge", "on", ">edge-pw", "~*", "+@all"
    )
    server.start_as("edge", "edge-pw")
    counting.add(CLIENT, "client", "development", ["*"], FLAGS)
    writes_through(
        counting,
        server,
        ["--redis-url", server.url, "--redis-username", "edge", "--redis-password", "edge-pw"],
    )


def test_the_redis_timeouts_bound_a_redis_that_never_answers(counting: CountingUpstream) -> None:
    """A listener that takes connections and answers nothing: the read at start gives up after
    --redis-read-connection-timeout-milliseconds (the edge gets ready from the upstream), the writes after
    --redis-write-connection-timeout-milliseconds, and all of it is one line."""
    silent = socket.create_server(("127.0.0.1", 0))
    port = silent.getsockname()[1]
    counting.add(CLIENT, "client", "development", ["*"], FLAGS)
    counting.add(FRONTEND, "frontend", "development", ["*"])
    options = ["--redis-url", f"redis://127.0.0.1:{port}", "--redis-read-connection-timeout-milliseconds",
               "300", "--redis-write-connection-timeout-milliseconds", "300"]  # fmt: skip
    process = edge(counting.url, [CLIENT], *options)
    try:
        process.wait_ready()
        for name in ("gamma", "delta"):  # changes: writes that time out too
            counting.documents[CLIENT] = features_doc(("alpha", "default", True), (name, "default", True))
            wait_for(lambda name=name: name in flag_names(process, FRONTEND), f"{name} served")
    finally:
        out, err = process.stop(signal.SIGTERM)
        silent.close()
    assert process.popen.returncode == 0, err
    away = [line for line in out.splitlines() if "cannot be used" in line]
    assert len(away) == 1 and "Timeout" in away[0], out


@pytest.mark.parametrize("how", [["--redis-secure"], ["--redis-scheme", "tls"]])
def test_redis_over_tls(counting: CountingUpstream, tmp_path: Path, how: list[str]) -> None:
    """--redis-secure (or --redis-scheme tls) speaks TLS to a redis-server that speaks nothing else; its
    certificate is checked against the CAs OpenSSL is told of (SSL_CERT_FILE here: the test CA)."""
    ca = TestCA(tmp_path / "ca")
    server = RedisServer(tmp_path, ca=ca)
    server.start()
    counting.add(CLIENT, "client", "development", ["*"], FLAGS)
    options = ["--redis-url", server.url] if how == ["--redis-secure"] else ["--redis-host", "127.0.0.1"]
    options += ["--redis-port", str(server.port), *how]
    writes_through(counting, server, options, env={"SSL_CERT_FILE": str(ca.ca_file)})


def test_a_redis_that_refuses_at_start_costs_one_line(counting: CountingUpstream, tmp_path: Path) -> None:
    server = RedisServer(tmp_path, "--requirepass", "the-right-one")
    server.start()
    counting.add(CLIENT, "client", "development", ["*"], FLAGS)
    counting.add(FRONTEND, "frontend", "development", ["*"])
    process = edge(counting.url, [CLIENT], "--redis-url", server.url, "--redis-password", "a-wrong-one")
    try:
        process.wait_ready()  # from the upstream
        for name in ("gamma", "delta"):  # changes: writes that are refused too
            counting.documents[CLIENT] = features_doc(("alpha", "default", True), (name, "default", True))
            wait_for(lambda name=name: name in flag_names(process, FRONTEND), f"{name} served")
    finally:
        out, err = process.stop(signal.SIGTERM)
        server.kill()
    assert process.popen.returncode == 0, err
    assert sum("cannot be used" in line for line in out.splitlines()) == 1, out
    assert "a-wrong-one" not in out + err


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["--redis-url", "redis://127.0.0.1:1", "--redis-mode", "cluster"],
            "--redis-mode: cluster is not supported",
        ),
        (["--redis-url", "redis://127.0.0.1:1", "--backup-folder", "/tmp"], "choose one place"),
        (["--redis-url", "http://127.0.0.1:1"], "--redis-url: give a redis://"),
        (["--redis-url", "redis://127.0.0.1:1/cache"], "--redis-url: after the host, only a database"),
        (["--redis-url", "redis://127.0.0.1:1/0?socket_timeout=x"], "--redis-url: after the host"),
        (["--redis-password", "pw"], "--redis-password needs --redis-url or --redis-host"),
    ],
)
def test_what_cannot_persist_stops_the_start_with_one_line(args: list[str], says: str) -> None:
    process = edge("http://127.0.0.1:1", [CLIENT], *args)
    _, err = process.popen.communicate(timeout=60)
    assert process.popen.returncode == 2
    assert len(err.strip().splitlines()) == 1 and says in err, err
    assert "pw" not in err
