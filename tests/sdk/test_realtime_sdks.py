"""The official server SDKs, unchanged, following the flag server's changes as they happen: the Node SDK
(npm `unleash-client`, pinned in tests/sdk/node/package-lock.json) streaming (`experimentalMode: {type:
'streaming'}`) and polling deltas (`{type: 'polling', format: 'delta'}`), and the Python SDK
(`UnleashClient`, pinned in pyproject.toml) streaming (`experimental_mode={"type": "streaming"}`).

Each sees every change, in order, and nothing is missed across a restart of the server it reads: while
that server is down, changes go through a second server on the same database (SQLite file or PostgreSQL),
and the SDK catches up when its server is back (the stream's Last-Event-ID, the delta's ETag).
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.demo.test_sdk_agreement import sdk_client
from tests.sdk.oracle import NODE_PROJECT
from tests.server.harness import (
    CLIENT_TOKEN,
    PostgresDatabases,
    ServerProcess,
    base_env,
    terminate,
    unique,
)

pytestmark = pytest.mark.slow

WAIT = 60.0  # how long a step may take before the test fails (never a measured bound)
State = dict[str, bool]  # flag name -> enabled, as the SDK holds it


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def module_servers(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    postgres_databases: PostgresDatabases,
) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """The server the SDK reads, and a second one on the same database that writes while it is down: one
    pair per database for the module (each test names its flags uniquely)."""
    folder = tmp_path_factory.mktemp("realtime")
    if request.param == "postgres":
        database_env = {"DATABASE_URL": postgres_databases.create()}
    else:
        database_env = {"DATABASE_PATH": str(folder / "flags.db")}
    read = ServerProcess(base_env(**database_env), log_path=str(folder / "read.log")).start()
    write = ServerProcess(base_env(**database_env), log_path=str(folder / "write.log")).start()
    try:
        yield read, write
    finally:
        assert [read.stop(), write.stop()] == [0, 0]


@pytest.fixture
def servers(
    module_servers: tuple[ServerProcess, ServerProcess],
) -> tuple[ServerProcess, ServerProcess]:
    """The module's pair, the reading server running again if a test before this one ended with it down
    (each test stops it and starts it again on its port)."""
    read, _ = module_servers
    assert read.process is not None
    if read.process.poll() is not None:
        read.start()
    return module_servers


class NodeFollower:
    """tests/sdk/node/follow.js: every state the Node SDK holds after a `changed` event."""

    def __init__(self, url: str, mode: dict[str, str], log: Path) -> None:
        job = {"url": url, "token": CLIENT_TOKEN, "appName": "realtime", "mode": mode, "refreshInterval": 250}
        self.stderr = log.open("wb")
        self.process = subprocess.Popen(
            ["node", "follow.js"],
            cwd=NODE_PROJECT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
        )
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(job).encode())
        self.process.stdin.close()
        self.states: list[State] = []
        self.modes: list[dict[str, str]] = []
        self._lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(json.loads(line))

    def wait_for(self, wanted: Callable[[State], bool]) -> State:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if "mode" in line:
                self.modes.append(line["mode"])
                continue
            self.states.append(line["flags"])
            if wanted(line["flags"]):
                return line["flags"]
        raise AssertionError(f"the Node SDK never held the state wanted; last: {self.states[-1:]}")

    def stop(self) -> None:
        terminate(self.process, timeout=10)
        self._reader.join(timeout=10)
        assert self.process.stdout is not None
        self.process.stdout.close()
        self.stderr.close()


class PythonFollower:
    """UnleashClient in streaming mode; its state sampled until it holds what is wanted."""

    def __init__(self, url: str, cache: Path) -> None:
        streaming = {"type": "streaming"}
        self.client = sdk_client(url, CLIENT_TOKEN, "realtime", cache, experimental_mode=streaming)
        self.states: list[State] = []

    def wait_for(self, wanted: Callable[[State], bool]) -> State:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            state = {name: self.client.is_enabled(name) for name in self.client.feature_definitions()}
            if not self.states or state != self.states[-1]:
                self.states.append(state)
            if wanted(state):
                return state
            time.sleep(0.01)
        raise AssertionError(f"the Python SDK never held the state wanted; last: {self.states[-1:]}")

    def stop(self) -> None:
        self.client.destroy()


def follow_every_change(
    follower: NodeFollower | PythonFollower, read: ServerProcess, write: ServerProcess
) -> None:
    """Changes one at a time through both servers, each seen before the next; then changes while the
    SDK's server is down, all seen once it is back; every state the SDK held respects the order."""
    created: list[str] = []
    run = unique("run")  # the servers are the module's: this run's flags are its own

    def create(server: ServerProcess, name: str) -> None:
        server.api().create_feature(name)
        created.append(name)

    first = f"{run}-step-0"
    create(read, first)
    follower.wait_for(lambda state: first in state)
    for index in range(1, 5):
        create((read, write)[index % 2], f"{run}-step-{index}")
        follower.wait_for(lambda state, name=f"{run}-step-{index}": name in state)
    read.api().switch(first, True)
    follower.wait_for(lambda state: state[first] is True)

    assert read.stop() == 0
    for index in range(5, 8):
        create(write, f"{run}-step-{index}")
    write.api().switch(first, False)
    read.start()
    follower.wait_for(lambda state: all(name in state for name in created) and state[first] is False)
    create(read, f"{run}-after-restart")
    follower.wait_for(lambda state: f"{run}-after-restart" in state)

    for state in follower.states:
        present = [name for name in created if name in state]
        assert present == created[: len(present)], state  # never a later flag without an earlier one


@pytest.mark.parametrize(
    "mode",
    [{"type": "streaming"}, {"type": "polling", "format": "delta"}],
    ids=["streaming", "delta-polling"],
)
def test_node_sdk_sees_every_change_in_order(
    servers: tuple[ServerProcess, ServerProcess], mode: dict[str, str], tmp_path: Path
) -> None:
    read, write = servers
    follower = NodeFollower(f"{read.url}/api/", mode, tmp_path / "node.log")
    try:
        follow_every_change(follower, read, write)
    finally:
        follower.stop()
    # It never fell back to full polling: the server kept serving what the mode asks for.
    assert follower.modes == [], (follower.modes, (tmp_path / "node.log").read_text())


def test_python_sdk_streaming_sees_every_change_in_order(
    servers: tuple[ServerProcess, ServerProcess], tmp_path: Path
) -> None:
    read, write = servers
    follower = PythonFollower(f"{read.url}/api", tmp_path / "cache")
    try:
        follow_every_change(follower, read, write)
    finally:
        follower.stop()
