"""`flagproxy proxy --streaming` and `flagproxy edge --streaming` reading a real `flagproxy server`'s stream
(GET /api/client/streaming), with polling set to 60 s so that only the stream can bring a change in time.

- an admin change shows up in POST /proxy and edge's /api/frontend, and the proxy never polled;
- a restart of the server: changes made meanwhile (through a second server on the same database) all show
  up once it is back, the stream resumed;
- after random sequences of admin changes (hypothesis) the streaming proxy (its changes patched into the
  served engine: flagproxy/instance/patcher.py) and edge, each with one and two workers (edge's changes
  relayed as events and patched into each worker's engines: flagproxy/edge/relayed.py), answer every flag as
  a proxy that polls the same server (and so reads a full document of the same revision) does, and a reader
  that follows an edge's /api/client/delta from its first hydration holds that full document too;
- each stops on SIGTERM with its stream open, exit status 0.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from flagproxy.compiler.delta import DeltaState
from tests.demo.processes import ProxyProcess
from tests.edge.harness import EdgeProcess, edge
from tests.http.loopback import fetch
from tests.http.stream_stub import eventually
from tests.server.harness import (
    CLIENT_TOKEN,
    DEFAULT_PROJECT_CLIENT_TOKEN,
    FRONTEND_TOKEN,
    Api,
    PostgresDatabases,
    ServerProcess,
    base_env,
)

pytestmark = pytest.mark.slow

SDK_TOKEN = "streaming-test-sdk-token"  # reads a proxy's /proxy/client/features
PROXY_ARGS = ("--enable-all-endpoint", "--exp-server-side-sdk-config-tokens", SDK_TOKEN)
CONTEXTS = [
    {"userId": str(n), "properties": {"region": region}} for n in (1, 2, 7) for region in ("eu", "us")
]


class Readers:
    """The server, a second server on its database, the streaming proxy and edge, and a polling proxy."""

    def __init__(self, tmp: Path, database: dict[str, str]) -> None:
        self.tmp = tmp
        self.env = base_env(**database)
        self.started: list[Any] = []
        self.server = self._started(ServerProcess(self.env, log_path=str(tmp / "server.log")).start())
        self.writer = self._started(ServerProcess(self.env, log_path=str(tmp / "writer.log")).start())
        self.proxy = self._started(ProxyProcess(
            self.server.url, 60_000, log_path=str(tmp / "proxy.log"), extra_args=("--streaming", *PROXY_ARGS),
        ).start())  # fmt: skip
        # Two workers: the leader relays each change's events, each worker patches them in
        # (flagproxy/instance/relay.py).
        self.workers = self._started(ProxyProcess(
            self.server.url, 60_000, log_path=str(tmp / "workers.log"),
            extra_args=("--streaming", "--workers", "2", *PROXY_ARGS),
        ).start())  # fmt: skip
        self.edge: EdgeProcess = self._started(
            edge(self.server.url, [CLIENT_TOKEN], "--streaming", "--features-refresh-interval-seconds", "60")
        )
        self.edge.wait_ready()
        # Two workers: the leader relays each change's events, each worker patches its scopes' engines.
        self.edges = self._started(edge(
            self.server.url, [CLIENT_TOKEN], "--streaming", "--features-refresh-interval-seconds", "60",
            "--workers", "2",
        ))  # fmt: skip
        self.edges.wait_ready()
        self.deltas = [DeltaReader(self.edge), DeltaReader(self.edges)]
        self.polling = self._started(
            ProxyProcess(
                self.server.url, 100, log_path=str(tmp / "polling.log"), extra_args=PROXY_ARGS
            ).start()
        )

    def _started(self, process: Any) -> Any:
        self.started.append(process)
        return process

    def restart_server(self) -> None:
        assert self.server.stop() == 0
        self.server = ServerProcess(self.env, port=self.server.port, log_path=str(self.tmp / "server2.log"))
        self.started[0] = self.server.start()

    def stop(self) -> None:
        """Every process started, on SIGTERM: each exits 0 (the proxy and edge with their streams open)."""
        codes = {}
        for process in reversed(getattr(self, "started", [])):
            if isinstance(process, EdgeProcess):
                process.stop(signal.SIGTERM)
                codes[f"edge {process.port}"] = process.popen.returncode
            else:
                codes[f"{type(process).__name__} {process.port}"] = process.stop()
        assert codes == dict.fromkeys(codes, 0)


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def readers(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Readers]:
    tmp = Path(tmp_path_factory.mktemp("streaming"))
    if request.param == "postgres":
        databases = PostgresDatabases()
        request.addfinalizer(databases.drop_all)
        database = {"DATABASE_URL": databases.create()}
    else:
        database = {"DATABASE_PATH": str(tmp / "flags.db")}
    started = Readers.__new__(Readers)
    try:
        started.__init__(tmp, database)  # type: ignore[misc]
        yield started
    finally:
        started.stop()


def proxy_enabled(proxy: ProxyProcess, name: str) -> bool:
    status, body = proxy.request("POST", "/proxy", {"context": {"userId": "1"}, "toggles": [name]})
    assert status == 200, body
    return any(toggle["name"] == name and toggle["enabled"] for toggle in body["toggles"])


def edge_enabled(process: EdgeProcess, name: str) -> bool:
    status, _, body = process.get(f"/api/frontend/features/{name}?userId=1", FRONTEND_TOKEN)
    return status == 200 and orjson.loads(body)["enabled"]


class DeltaReader:
    """An SDK's view through an edge's /api/client/delta: hydrated once, then each answer's events applied
    to what it holds, its ETag sent back as If-None-Match."""

    def __init__(self, process: EdgeProcess) -> None:
        self.process = process
        self.state = DeltaState()
        self.etag: str | None = None

    def caught_up(self) -> tuple[dict[str, Any], dict[int, Any]]:
        headers = {"If-None-Match": self.etag} if self.etag else {}
        status, answered, body = self.process.get("/api/client/delta", CLIENT_TOKEN, headers=headers)
        assert status in (200, 304), (status, body)
        if status == 200:
            self.state.apply(orjson.loads(body)["events"])
            self.etag = answered["etag"]
        return document(self.state.document())


def series(proxy: ProxyProcess, prefix: str) -> float:
    """The sum of a series' samples whose line starts with `prefix` (name and labels), read with
    prometheus_client's parser."""
    status, text = proxy.request("GET", "/proxy/internal-backstage/prometheus")
    assert status == 200
    return samples(text, prefix)


def edge_series(process: EdgeProcess, prefix: str) -> float:
    status, _, text = process.get("/internal-backstage/metrics")
    assert status == 200
    return samples(text, prefix)


def samples(text: bytes, prefix: str) -> float:
    return sum(
        sample.value
        for family in text_string_to_metric_families(text.decode())
        for sample in family.samples
        if (sample.name + str(sorted(sample.labels.items()))).startswith(prefix)
    )


def proxy_fetches(proxy: ProxyProcess) -> float:
    """flagproxy_upstream_fetches_total over its results: the proxy's polls."""
    return series(proxy, "flagproxy_upstream_fetches_total")


def new_flag(api: Api, name: str) -> None:
    api.create_feature(name)
    api.add_strategy(name, {"name": "default", "parameters": {}, "constraints": []})


def test_an_admin_change_shows_up_without_a_poll(readers: Readers) -> None:
    api = readers.writer.api()
    new_flag(api, "streamed-on")
    api.switch("streamed-on", True)
    eventually(lambda: proxy_enabled(readers.proxy, "streamed-on"), "POST /proxy sees the change")
    eventually(lambda: proxy_enabled(readers.workers, "streamed-on"), "and with two workers")
    eventually(lambda: edge_enabled(readers.edge, "streamed-on"), "edge's /api/frontend sees the change")
    eventually(lambda: edge_enabled(readers.edges, "streamed-on"), "and with two workers")
    api.switch("streamed-on", False)
    eventually(lambda: not proxy_enabled(readers.proxy, "streamed-on"), "POST /proxy sees it off")
    eventually(lambda: not proxy_enabled(readers.workers, "streamed-on"), "and with two workers")
    eventually(lambda: not edge_enabled(readers.edge, "streamed-on"), "edge sees it off")
    eventually(lambda: not edge_enabled(readers.edges, "streamed-on"), "and with two workers")
    assert proxy_fetches(readers.proxy) == 0  # every change came by the stream
    assert series(readers.proxy, "flagproxy_upstream_streaming") == 1
    assert series(readers.proxy, "flagproxy_upstream_stream_events_total[('event', 'unleash-updated')]") >= 2
    # ... and was patched into the served engine (flagproxy/instance/patcher.py), not compiled whole again
    assert series(readers.proxy, "flagproxy_upstream_stream_changes_total[('applied', 'patched')]") >= 2
    assert series(readers.workers, "flagproxy_upstream_stream_changes_total[('applied', 'patched')]") >= 2
    # Edge relayed them to its workers as events (flagproxy/edge/relayed.py), nothing published whole.
    for process in (readers.edge, readers.edges):
        assert edge_series(process, "flagproxy_upstream_stream_changes_total[('applied', 'patched')]") >= 2


def test_a_server_restart_misses_nothing(readers: Readers) -> None:
    api = readers.writer.api()
    names = [f"while-down-{n}" for n in range(3)]
    for name in names:
        new_flag(api, name)
    for name in names:
        eventually(lambda name=name: proxy_enabled(readers.proxy, name) is False, f"{name} known")
    assert readers.server.stop() == 0
    for name in names:  # the streams' server is down: these go in through the other one
        api.switch(name, True)
    readers.restart_server()
    for name in names:
        eventually(lambda name=name: proxy_enabled(readers.proxy, name), f"POST /proxy sees {name}")
        eventually(lambda name=name: edge_enabled(readers.edge, name), f"edge sees {name}")
    assert proxy_fetches(readers.proxy) == 0
    assert series(readers.proxy, "flagproxy_upstream_stream_ends_total") >= 1  # and was reconnected
    assert series(readers.proxy, "flagproxy_upstream_streaming") == 1


def test_the_stream_is_scoped_as_the_poll(readers: Readers) -> None:
    """A proxy's filters (here `--name-prefix`) and its token's environment scope what it streams."""
    api = readers.writer.api()
    proxy = ProxyProcess(
        readers.server.url, 60_000, log_path=str(readers.tmp / "prefixed.log"),
        extra_args=("--streaming", "--name-prefix", "kept-", *PROXY_ARGS),
    ).start()  # fmt: skip
    try:
        for name in ("kept-a", "dropped-a"):
            new_flag(api, name)
            api.switch(name, True)
        api.switch("kept-a", False, environment="production")  # another environment: nothing to stream
        eventually(lambda: proxy_enabled(proxy, "kept-a"), "the kept flag")
        eventually(lambda: proxy_enabled(readers.proxy, "dropped-a"), "the unfiltered proxy has the other")
        assert not proxy_enabled(proxy, "dropped-a")
        assert set(served_document(proxy.port, "/proxy/client/features", SDK_TOKEN)[0]) == {"kept-a"}
    finally:
        assert proxy.stop() == 0


# ---- random admin changes: streamed answers are the answers of a full document ------------------------

NAMES = [f"h-{n}" for n in range(6)]
OPERATIONS = st.one_of(
    st.tuples(st.just("create"), st.sampled_from(NAMES)),
    st.tuples(st.just("switch"), st.sampled_from(NAMES), st.booleans()),
    st.tuples(st.just("constrain"), st.sampled_from(NAMES), st.sampled_from(["1", "2", "7"])),
    st.tuples(st.just("segment"), st.sampled_from(NAMES), st.sampled_from(["eu", "us"])),
    st.tuples(st.just("variants"), st.sampled_from(NAMES), st.integers(1, 3)),
    st.tuples(st.just("archive"), st.sampled_from(NAMES)),
    st.tuples(st.just("revive"), st.sampled_from(NAMES)),
    st.tuples(st.just("region"), st.sampled_from(["eu", "us"]), st.booleans()),
)


def apply(api: Api, operation: tuple[Any, ...]) -> None:
    """One admin change; one the server refuses (a flag that does not exist yet, one archived) is skipped:
    the server answers it with a 4xx and nothing changes."""
    kind, *args = operation
    features = "/api/admin/projects/default/features"
    if kind == "create":
        answer = api.post(features, {"name": args[0]})
    elif kind == "switch":
        answer = api.post(f"{features}/{args[0]}/environments/development/{'on' if args[1] else 'off'}")
    elif kind == "constrain":
        strategy = {"name": "flexibleRollout", "parameters": {"rollout": "100", "stickiness": "userId",
                    "groupId": args[0]}, "constraints": [{"contextName": "userId", "operator": "IN",
                    "values": [args[1]]}]}  # fmt: skip
        answer = api.post(f"{features}/{args[0]}/environments/development/strategies", strategy)
    elif kind == "segment":
        segment = segment_id(api, args[1])
        strategy = {"name": "default", "parameters": {}, "constraints": [], "segments": [segment]}
        answer = api.post(f"{features}/{args[0]}/environments/development/strategies", strategy)
    elif kind == "variants":
        variants = [{"name": f"v{n}", "weight": 1000 // args[1], "weightType": "variable",
                     "stickiness": "userId", "payload": {"type": "string", "value": f"p{n}"}}
                    for n in range(args[1])]  # fmt: skip
        answer = api.put(f"{features}/{args[0]}/environments/development/variants", variants)
    elif kind == "archive":
        answer = api.delete(f"{features}/{args[0]}")
    elif kind == "revive":
        answer = api.post(f"/api/admin/archive/revive/{args[0]}")
    else:  # a segment's constraint changes: every flag using it answers anew
        values = ["eu", "us"] if args[1] else [args[0]]
        region = {"contextName": "region", "operator": "IN", "values": values}
        answer = api.put(f"/api/admin/segments/{segment_id(api, args[0])}",
                         {"name": f"in-{args[0]}", "constraints": [region]})  # fmt: skip
    assert answer.status < 500, (operation, answer.status, answer.body)


def segment_id(api: Api, region: str) -> int:
    listed = api.get("/api/admin/segments").json()["segments"]
    for segment in listed:
        if segment["name"] == f"in-{region}":
            return int(segment["id"])
    constraint = {"contextName": "region", "operator": "IN", "values": [region]}
    return int(api.create_segment(f"in-{region}", [constraint])["id"])


def answers(fetch: Callable[[dict[str, Any]], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Every flag's answer for each context, keyed by name (the order of a whole-list answer is the
    document's, and a streamed flag added again goes last, as in Unleash's SDKs)."""
    return [
        {
            t["name"]: (
                t["enabled"],
                t["variant"]["name"],
                t["variant"]["enabled"],
                t["variant"].get("payload"),
            )
            for t in fetch(context)
        }
        for context in CONTEXTS
    ]


def proxy_answers(proxy: ProxyProcess) -> list[dict[str, Any]]:
    def fetch(context: dict[str, Any]) -> list[dict[str, Any]]:
        status, body = proxy.request("POST", "/proxy/all", {"context": context})
        assert status == 200, body
        return body["toggles"]

    return answers(fetch)


def edge_answers(process: EdgeProcess) -> list[dict[str, Any]]:
    def fetch(context: dict[str, Any]) -> list[dict[str, Any]]:
        status, _, body = process.post("/api/frontend/all", FRONTEND_TOKEN, json={"context": context})
        assert status == 200, body
        return orjson.loads(body)["toggles"]

    return answers(fetch)


def document(raw: dict[str, Any]) -> tuple[dict[str, Any], dict[int, Any]]:
    """A features document as what its answers depend on: features by name, the segments they use by id
    (a delta hydration carries every segment, a full fetch those its features use)."""
    features = {f["name"]: f for f in raw["features"]}
    used = {i for f in features.values() for s in f.get("strategies", []) for i in s.get("segments", [])}
    return features, {s["id"]: s for s in raw.get("segments", []) if s["id"] in used}


def served_document(port: int, path: str, token: str) -> tuple[dict[str, Any], dict[int, Any]]:
    status, _, body = fetch(port, "GET", path, {"Authorization": token}, timeout=10)
    assert status == 200, body
    return document(orjson.loads(body))


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(OPERATIONS, min_size=1, max_size=8))
def test_streamed_state_is_the_full_document(readers: Readers, operations: list[tuple[Any, ...]]) -> None:
    api = readers.writer.api()
    for operation in operations:
        apply(api, operation)
    full = document(readers.server.api(CLIENT_TOKEN).client_features(spec="5.2.0"))
    # Each reader holds the server's last revision (a streamed state that went wrong never comes back,
    # and this fails) ...
    for port, path, token in (
        (readers.proxy.port, "/proxy/client/features", SDK_TOKEN),
        (readers.workers.port, "/proxy/client/features", SDK_TOKEN),
        (readers.polling.port, "/proxy/client/features", SDK_TOKEN),
        (readers.edge.port, "/api/client/features", CLIENT_TOKEN),
        (readers.edges.port, "/api/client/features", CLIENT_TOKEN),
        # A narrower scope cut from the same feed (every flag here is the default project's).
        (readers.edge.port, "/api/client/features", DEFAULT_PROJECT_CLIENT_TOKEN),
        (readers.edges.port, "/api/client/features", DEFAULT_PROJECT_CLIENT_TOKEN),
    ):
        eventually(lambda: served_document(port, path, token) == full, f"the document at {port}{path}")  # noqa: B023
    # ... and answers every flag as the proxy that read it whole.
    polled = proxy_answers(readers.polling)
    assert proxy_answers(readers.proxy) == polled
    # Each request a new connection: either worker answers; one woken a moment later than the other may
    # still answer the last revision, so this one waits (a wrong patched state never comes right).
    eventually(lambda: proxy_answers(readers.workers) == polled, "both workers' answers")
    assert edge_answers(readers.edge) == polled
    eventually(lambda: edge_answers(readers.edges) == polled, "both edge workers' answers")
    # The delta log an SDK follows (the upstream's events, with edge's ids) adds up to the same document.
    for reader in readers.deltas:
        eventually(lambda: reader.caught_up() == full, f"the delta reader of {reader.process.port}")  # noqa: B023
