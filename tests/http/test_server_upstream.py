"""The proxy's upstream contract against a real `flagproxy server`: the filters it sends (project, name
prefix, tags) select what the server's client API serves, and its conditional polls get the server's 304
until something changes there. tests/http/test_upstream_sync.py checks what the proxy sends against the
stub, which alone can record every header and fail on purpose; here the server decides what comes back.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.http.loopback import KEY
from tests.http.processes import ProxyUnderTest, process_env
from tests.server.harness import CLIENT_TOKEN, ServerProcess, base_env, unique

pytestmark = pytest.mark.slow

PROMETHEUS = "/proxy/internal-backstage/prometheus"
DEFAULT_STRATEGY = {"name": "default", "constraints": [], "parameters": {}}


class Seeded:
    """A server with flags that each filter tells apart, all on in development."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.api = server.api()
        self.prefix = unique("up")
        answer = self.api.post("/api/admin/projects", {"id": self.prefix, "name": "Filters"})
        assert answer.status in (200, 201), answer.body
        self.names = {
            self.flag("a", "default", tagged=True),  # the one every filter below lets through
            self.flag("b", "default", tagged=False),  # no tag
            self.flag("c", self.prefix, tagged=True),  # another project
            self.flag("d", "default", tagged=True, prefixed=False),  # another name
        }

    def flag(self, suffix: str, project: str, *, tagged: bool, prefixed: bool = True) -> str:
        name = f"{self.prefix}-{suffix}" if prefixed else f"x{suffix}-{self.prefix}"
        self.api.create_feature(name, project)
        self.api.add_strategy(name, DEFAULT_STRATEGY, "development", project)
        self.api.switch(name, True, "development", project)
        if tagged:
            answer = self.api.post(f"/api/admin/features/{name}/tags", {"type": "simple", "value": "proxy"})
            assert answer.status < 300, answer.body
        return name


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seeded]:
    folder = Path(tmp_path_factory.mktemp("proxy-upstream-server"))
    env = base_env(DATABASE_PATH=str(folder / "flags.db"))
    server = ServerProcess(env, log_path=str(folder / "server.log"))
    server.start()
    try:
        yield Seeded(server)
    finally:
        server.stop()


@pytest.fixture
def proxy_of(seeded: Seeded, tmp_path: Path) -> Iterator[Any]:
    started: list[ProxyUnderTest] = []

    def start(**options: Any) -> ProxyUnderTest:
        configuration = {
            "service_url": f"{seeded.server.url}/api",
            "service_api_token": CLIENT_TOKEN,
            "client_keys": [KEY],
            "metrics_interval": 0,
            **options,
        }
        # One TMPDIR for all, as proxies on one host share /tmp: each keeps its default backup there.
        started.append(ProxyUnderTest(configuration, None, process_env(tmp_path)))
        started[-1].wait_ready()
        return started[-1]

    yield start
    for process in started:
        process.stop()


def served(proxy: ProxyUnderTest, prefix: str) -> set[str]:
    """The flags the proxy serves of this module's server (the server may hold other tests' flags)."""
    return {t["name"] for t in proxy.toggles() if prefix in t["name"]}


def fetches(proxy: ProxyUnderTest, result: str) -> float:
    status, _, body = proxy.get(PROMETHEUS)
    assert status == 200, body
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            if sample.name == "flagproxy_upstream_fetches_total" and sample.labels == {"result": result}:
                return sample.value
    return 0.0


def wait_until(check, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.05)


def test_the_filters_select_what_the_server_serves(seeded: Seeded, proxy_of) -> None:
    # Started one after another in one folder: a proxy with other filters of the same upstream and token
    # must not be ready from the backup the one before it left there (it was, serving every flag).
    p, names = seeded.prefix, seeded.names
    assert served(proxy_of(), p) & names == {f"{p}-a", f"{p}-b", f"{p}-c", f"xd-{p}"}
    every_filter = proxy_of(project_name="default", name_prefix=f"{p}-", tags="simple:proxy")
    assert served(every_filter, p) & names == {f"{p}-a"}
    other_project = proxy_of(project_name=p, name_prefix=f"{p}-")
    assert served(other_project, p) & names == {f"{p}-c"}


def test_polls_get_the_servers_304_until_a_change_there(seeded: Seeded, proxy_of) -> None:
    p = seeded.prefix
    proxy = proxy_of(name_prefix=f"{p}-", refresh_interval=100)
    wait_until(lambda: fetches(proxy, "not_modified") >= 2)  # the server's ETag came back: unchanged
    updated = fetches(proxy, "updated")
    new = seeded.flag("new", "default", tagged=False)
    wait_until(lambda: new in served(proxy, p))
    assert fetches(proxy, "updated") > updated
    assert fetches(proxy, "failed") == 0


def test_registration_and_usage_land_in_the_servers_records(seeded: Seeded, proxy_of) -> None:
    """What the proxy posts (register, metrics) is what the server accepts and keeps: the application is
    listed, and the named toggle's counts are in its usage for the token's environment."""
    p = seeded.prefix
    app = unique("proxy-usage")
    proxy = proxy_of(name_prefix=f"{p}-", service_app_name=app, metrics_interval=500)
    for _ in range(3):
        status, _, body = proxy.post("/proxy", {"toggles": [f"{p}-a"], "context": {"userId": "u1"}}, key=KEY)
        assert status == 200, body
    usage_path = f"/api/admin/client-metrics/features/{p}-a"

    def counted() -> set[tuple[str, int, int]]:
        usage = seeded.api.get(usage_path).json()["lastHourUsage"]
        return {(u["environment"], u["yes"], u["no"]) for u in usage if u["appName"] == app}

    wait_until(lambda: counted() == {("development", 3, 0)}, timeout=20)
    applications = seeded.api.get("/api/admin/metrics/applications").json()["applications"]
    assert [a["appName"] for a in applications].count(app) == 1, applications
