"""The official server SDKs, unchanged, following changes through `flagproxy edge`: the Node SDK (npm
`unleash-client`, pinned in tests/sdk/node/package-lock.json) streaming and polling deltas, and the
Python SDK (`UnleashClient`, pinned in pyproject.toml) streaming, against an edge reading a real
`flagproxy server` (polling it, or with --streaming reading its stream, each change relayed to the edge's
workers as events: flagproxy/edge/relayed.py), and the Node SDK streaming from an edge chained below another
edge.

Each change is made through the server's admin API. The SDK sees every change, in order, and misses
nothing across a restart of the edge it reads: changes made while that edge is down are seen once it is
back (its Last-Event-ID or ETag is from the earlier run, so it hydrates).
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.edge.harness import EdgeProcess, edge
from tests.edge.test_delta import stream_series
from tests.sdk.test_realtime_sdks import NodeFollower, PythonFollower
from tests.server.harness import CLIENT_TOKEN, ServerProcess, base_env, unique

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One server for the module (each test starts its own edges and names its flags uniquely)."""
    folder = tmp_path_factory.mktemp("realtime-edge")
    process = ServerProcess(base_env(DATABASE_PATH=str(folder / "flags.db")), log_path=str(folder / "s.log"))
    process.start()
    yield process
    assert process.stop() == 0


class RestartableEdge:
    """An edge reading `upstream` on one port, stopped (SIGTERM, exit 0) and started again there."""

    def __init__(self, upstream: str, *extra: str) -> None:
        self.upstream, self.extra = upstream, extra
        self.process = self._start(None)

    def _start(self, port: int | None) -> EdgeProcess:
        process = edge(self.upstream, [CLIENT_TOKEN], *self.extra, env={"PORT": str(port)} if port else None)
        process.wait_ready()
        return process

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.process.port}"

    def stop(self) -> int | None:
        self.process.stop(signal.SIGTERM)
        return self.process.popen.returncode

    def restart(self) -> None:
        self.process = self._start(self.process.port)


def follow_every_change(
    follower: NodeFollower | PythonFollower, server: ServerProcess, reader: RestartableEdge
) -> None:
    """Changes one at a time, each seen before the next; then changes while the SDK's edge is down, all
    seen once it is back; every state the SDK held respects the order."""
    api = server.api()
    created: list[str] = []
    run = unique("run")  # the server is the module's: this run's flags are its own

    def create(name: str) -> None:
        api.create_feature(name)
        created.append(name)

    first = f"{run}-step-0"
    create(first)
    follower.wait_for(lambda state: first in state)
    for index in range(1, 4):
        create(f"{run}-step-{index}")
        follower.wait_for(lambda state, name=f"{run}-step-{index}": name in state)
    api.switch(first, True)
    follower.wait_for(lambda state: state[first] is True)

    assert reader.stop() == 0
    for index in range(4, 7):
        create(f"{run}-step-{index}")
    api.switch(first, False)
    reader.restart()
    follower.wait_for(lambda state: all(name in state for name in created) and state[first] is False)
    create(f"{run}-after-restart")
    follower.wait_for(lambda state: f"{run}-after-restart" in state)

    for state in follower.states:
        present = [name for name in created if name in state]
        assert present == created[: len(present)], state  # never a later flag without an earlier one


# How the edge reads the server: polling (its delta log made by comparing documents), or streaming with its
# polls a minute apart (only the stream brings a change in time; the log is the server's events).
UPSTREAM = {"polling": (), "streaming": ("--streaming", "--features-refresh-interval-seconds", "60")}


@pytest.fixture(params=list(UPSTREAM))
def through_edge(server: ServerProcess, request: pytest.FixtureRequest) -> Iterator[RestartableEdge]:
    reader = RestartableEdge(server.url, *UPSTREAM[request.param])
    yield reader
    reader.stop()


def node_follows(reader: RestartableEdge, server: ServerProcess, mode: dict[str, str], log: Path) -> None:
    follower = NodeFollower(f"{reader.url}/api/", mode, log)
    try:
        follow_every_change(follower, server, reader)
    finally:
        follower.stop()
    # It never fell back to full polling: the edge kept serving what the mode asks for.
    assert follower.modes == [], (follower.modes, log.read_text())


@pytest.mark.parametrize(
    "mode",
    [{"type": "streaming"}, {"type": "polling", "format": "delta"}],
    ids=["streaming", "delta-polling"],
)
def test_node_sdk_sees_every_change_through_edge_in_order(
    server: ServerProcess, through_edge: RestartableEdge, mode: dict[str, str], tmp_path: Path
) -> None:
    node_follows(through_edge, server, mode, tmp_path / "node.log")


@pytest.mark.parametrize("upstream", list(UPSTREAM))
def test_node_sdk_polling_deltas_from_two_workers_sees_every_change_in_order(
    server: ServerProcess, upstream: str, tmp_path: Path
) -> None:
    """Each poll of the SDK may land on either worker: both answer with the same event ids."""
    reader = RestartableEdge(server.url, "--workers", "2", *UPSTREAM[upstream])
    try:
        node_follows(reader, server, {"type": "polling", "format": "delta"}, tmp_path / "node.log")
    finally:
        reader.stop()


def test_python_sdk_streaming_sees_every_change_through_edge_in_order(
    server: ServerProcess, through_edge: RestartableEdge, tmp_path: Path
) -> None:
    follower = PythonFollower(f"{through_edge.url}/api", tmp_path / "cache")
    try:
        follow_every_change(follower, server, through_edge)
        # It streams from the restarted edge (one stream open), rather than having fallen back to polling.
        assert stream_series(through_edge.process)[0] == 1
    finally:
        follower.stop()


@pytest.mark.parametrize("upstream", ["polling", "streaming"])
def test_node_sdk_streams_from_an_edge_chained_below_an_edge(
    server: ServerProcess, upstream: str, tmp_path: Path
) -> None:
    """The bottom edge reads the top one by polling its features, or with --streaming by its stream."""
    top = edge(server.url, [CLIENT_TOKEN])
    started: list[Callable[[], object]] = [top.stop]
    try:
        top.wait_ready()
        extra = ("--streaming",) if upstream == "streaming" else ()
        bottom = RestartableEdge(f"http://127.0.0.1:{top.port}", *extra)
        started.append(bottom.stop)
        node_follows(bottom, server, {"type": "streaming"}, tmp_path / "node.log")
        # With --streaming the bottom edge holds one stream open on the top one (it did not fall back to
        # polling); polling, none (the SDK streams from the bottom edge only).
        assert stream_series(top)[0] == (1 if upstream == "streaming" else 0)
    finally:
        for stop in reversed(started):
            stop()


def test_node_sdk_beyond_the_stream_limit_polls_and_still_sees_changes(
    server: ServerProcess, tmp_path: Path
) -> None:
    reader = RestartableEdge(server.url, "--max-streams", "0")
    follower = NodeFollower(f"{reader.url}/api/", {"type": "streaming"}, tmp_path / "node.log")
    polled = unique("polled")
    try:
        server.api().create_feature(polled)
        follower.wait_for(lambda state: polled in state)
        server.api().switch(polled, True)
        follower.wait_for(lambda state: state.get(polled) is True)
        # The edge's `fetch-mode: polling` moved the SDK to polling (it says so once its first poll is
        # done), where it reads the features document.
        assert follower.modes == [{"from": "streaming", "to": "polling"}], follower.modes
    finally:
        follower.stop()
        reader.stop()
