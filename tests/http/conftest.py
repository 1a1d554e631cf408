"""Fixtures for tests through real sockets: see loopback.py for the servers they start."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flagproxy.proxy.settings import ProxySettings
from flagproxy.sync.backup import FileStorageProvider
from tests.http.loopback import KEY, SAMPLE, LoopThread, RunningProxy, StubUpstream
from tests.http.processes import Process


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


@pytest.fixture
def base_env(tmp_path: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "PYTHONPATH", "VIRTUAL_ENV")}
    return {**keep, "TMPDIR": str(tmp_path)}


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
