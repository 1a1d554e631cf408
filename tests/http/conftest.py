"""Fixtures for tests through real sockets: see loopback.py for the servers they start."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flagproxy.proxy.settings import ProxySettings
from flagproxy.sync.backup import FileStorageProvider
from tests.http.loopback import KEY, SAMPLE, LoopThread, RunningProxy, StubUpstream


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


@pytest.fixture
def proxy_factory(
    loop_thread: LoopThread, upstream: StubUpstream, tmp_path: Path
) -> Iterator[Callable[..., RunningProxy]]:
    """Start a proxy against `upstream` with test-friendly defaults; `wait=False` skips the ready wait."""
    started: list[RunningProxy] = []

    def start(*, wait: bool = True, **options: Any) -> RunningProxy:
        options.setdefault("service_url", upstream.url)
        options.setdefault("service_api_token", "stub-server-token")
        options.setdefault("client_keys", [KEY, "another-secret"])
        options.setdefault("refresh_interval", 100)
        options.setdefault("metrics_interval", 0)
        options.setdefault("service_instance_id", "test-instance")
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
def proxy(proxy_factory: Callable[..., RunningProxy]) -> RunningProxy:
    return proxy_factory()
