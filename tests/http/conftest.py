"""Fixtures for tests through real sockets: see loopback.py and processes.py for the servers they start.

A proxy under test is a real `flagproxy proxy` process configured through its environment
(processes.ProxyUnderTest): `proxy` and `shared_proxy(**options)` are one process per configuration for the
whole session, against one read-only stub upstream serving the sample features (for tests that neither
change the upstream nor read what it received); `proxy_factory(**options)` starts one for the test, against
the test's own `upstream` stub. `app_factory` serves the app inside the test process, only for tests that
hand it objects (a logger, a storage provider, strategies) or read its internals.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flagproxy.proxy.settings import ProxySettings
from flagproxy.sync.backup import FileStorageProvider
from tests.http.loopback import KEY, SAMPLE, LoopThread, RunningProxy, StubUpstream
from tests.http.processes import Process, ProxyUnderTest, process_env


@pytest.fixture(scope="session")
def loop_thread() -> Iterator[LoopThread]:
    loop = LoopThread()
    yield loop
    loop.close()


@pytest.fixture
def upstream(loop_thread: LoopThread) -> Iterator[StubUpstream]:
    stub = StubUpstream(loop_thread, json.loads(json.dumps(SAMPLE)))
    yield stub
    stub.stop()


# What every proxy under test is given unless the test says otherwise.
DEFAULTS: dict[str, Any] = {
    "service_api_token": "stub-server-token",
    "client_keys": [KEY, "another-secret"],
    "refresh_interval": 100,
    "metrics_interval": 0,
    "service_instance_id": "test-instance",
}


@pytest.fixture
def base_env(tmp_path: Path) -> dict[str, str]:
    return process_env(tmp_path)


@pytest.fixture
def proxy_factory(
    upstream: StubUpstream, base_env: dict[str, str]
) -> Iterator[Callable[..., ProxyUnderTest]]:
    """Start a real proxy process against the test's `upstream`; `wait=False` waits only until it listens."""
    started: list[ProxyUnderTest] = []

    def start(*, wait: bool = True, **options: Any) -> ProxyUnderTest:
        process = ProxyUnderTest({"service_url": upstream.url, **DEFAULTS, **options}, upstream, base_env)
        started.append(process)
        if wait:
            process.wait_ready()
        else:
            process.wait_listening()
        return process

    yield start
    for process in started:
        process.stop()


@pytest.fixture(scope="session")
def shared_upstream(loop_thread: LoopThread) -> Iterator[StubUpstream]:
    """The sample features, never changed: what the session's shared proxies read."""
    stub = StubUpstream(loop_thread, json.loads(json.dumps(SAMPLE)))
    yield stub
    stub.stop()


@pytest.fixture(scope="session")
def shared_proxy(
    shared_upstream: StubUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., ProxyUnderTest]]:
    """One real proxy process per configuration for the whole session, against `shared_upstream`."""
    running: dict[str, ProxyUnderTest] = {}

    def get(**options: Any) -> ProxyUnderTest:
        configuration = {"service_url": shared_upstream.url, **DEFAULTS, **options}
        key = json.dumps(configuration, sort_keys=True)
        if key not in running:
            env = process_env(tmp_path_factory.mktemp("shared-proxy"))
            running[key] = process = ProxyUnderTest(configuration, shared_upstream, env)
            process.wait_ready()
        return running[key]

    yield get
    for process in running.values():
        process.stop()


@pytest.fixture
def proxy(shared_proxy: Callable[..., ProxyUnderTest]) -> ProxyUnderTest:
    return shared_proxy()


@pytest.fixture
def app_factory(
    loop_thread: LoopThread, upstream: StubUpstream, tmp_path: Path
) -> Iterator[Callable[..., RunningProxy]]:
    """Serve the proxy app inside the test process, against `upstream`: only for tests that hand it
    objects (a logger, a storage provider, strategies) or read its internals (its store, its app)."""
    started: list[RunningProxy] = []

    def start(*, wait: bool = True, **options: Any) -> RunningProxy:
        options.setdefault("service_url", upstream.url)
        for key, value in DEFAULTS.items():
            options.setdefault(key, value)
        options.setdefault("storage_provider", FileStorageProvider(str(tmp_path)))
        settings = ProxySettings.load(options, env={})
        proxy = RunningProxy(loop_thread, settings, upstream)
        started.append(proxy)
        if wait:
            proxy.wait_ready()
        return proxy

    yield start
    for proxy in started:
        proxy.stop()


@pytest.fixture
def launch(base_env) -> Iterator:
    started: list[Process] = []

    def start(
        env: dict[str, str], args: list[str] | None = None, command: list[str] | None = None
    ) -> Process:
        process = Process(args or [], {**base_env, **env}, command)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()
