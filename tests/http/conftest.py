"""Fixtures for tests through real sockets: see loopback.py and processes.py for the servers they start.

A proxy under test is a real `flagproxy proxy` process configured through its environment
(processes.ProxyUnderTest): `proxy` and `shared_proxy(**options)` are one process per configuration for
the tests of this directory, against one read-only stub upstream serving the sample features (for tests
that neither change the upstream nor read what it received); `proxy_serving(document, **options)` is the
same for a document of the test's own (one stub and one process per document and configuration);
`proxy_factory(**options)` starts one for the test, against the test's own `upstream` stub. Options an
operator cannot give a process (a logger or storage object) are tested through a program that embeds the
app (`embedded`, embedded.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.http.loopback import KEY, SAMPLE, LoopThread, StubUpstream
from tests.http.processes import EmbeddedProxy, Process, ProxyUnderTest, process_env


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
# A shared process reads an upstream that never changes, and lives to the end of the session: polling it
# every 100 ms would cost each about 2 % of a core (the proxy and the stub's loop in pytest together) for
# the rest of the run, so it polls once a minute; a test that needs polls starts its own (proxy_factory).
SHARED = {**DEFAULTS, "refresh_interval": 60_000}


@pytest.fixture
def base_env(tmp_path: Path) -> dict[str, str]:
    return process_env(tmp_path)


@pytest.fixture
def proxy_factory(
    upstream: StubUpstream, base_env: dict[str, str]
) -> Iterator[Callable[..., ProxyUnderTest]]:
    """Start a real proxy process against the test's `upstream`; `wait=False` waits only until it listens."""
    started: list[ProxyUnderTest] = []

    def start(*, wait: bool = True, env: dict[str, str] | None = None, **options: Any) -> ProxyUnderTest:
        """`env`: variables that are no option of the proxy's (NO_PROXY)."""
        configuration = {"service_url": upstream.url, **DEFAULTS, **options}
        started.append(ProxyUnderTest(configuration, upstream, {**base_env, **(env or {})}))
        return _waited(started[-1], wait)

    yield start
    for process in started:
        process.stop()


def _waited(process: ProxyUnderTest, wait: bool) -> Any:
    """Until ready (`wait`), or only until it listens."""
    if wait:
        process.wait_ready()
    else:
        process.wait_listening()
    return process


@pytest.fixture(scope="session")
def shared_upstream(loop_thread: LoopThread) -> Iterator[StubUpstream]:
    """The sample features, never changed: what the session's shared proxies read."""
    stub = StubUpstream(loop_thread, json.loads(json.dumps(SAMPLE)))
    yield stub
    stub.stop()


# The shared processes by configuration, with the stub each reads when it is its own. They are stopped as
# soon as the run leaves tests/http (pytest_runtest_teardown below), not at the end of the session: a few
# dozen idle proxies (about 60 MB each) beside the later directories' servers only slow those down. A test
# of tests/http that runs after that (a run in another order) starts them again.
_RUNNING: dict[str, tuple[StubUpstream | None, ProxyUnderTest]] = {}
HERE = Path(__file__).parent


def _stop_shared() -> None:
    for stub, process in _RUNNING.values():
        process.stop()
        if stub is not None:
            stub.stop()
    _RUNNING.clear()


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if nextitem is None or Path(nextitem.path).parent != HERE:
        _stop_shared()


@pytest.fixture(scope="session")
def shared_proxy(
    shared_upstream: StubUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., ProxyUnderTest]]:
    """One real proxy process per configuration for the tests of tests/http, against `shared_upstream`."""

    def get(**options: Any) -> ProxyUnderTest:
        configuration = {"service_url": shared_upstream.url, **SHARED, **options}
        key = json.dumps(["shared", configuration], sort_keys=True)
        if key not in _RUNNING:
            env = process_env(tmp_path_factory.mktemp("shared-proxy"))
            _RUNNING[key] = (None, ProxyUnderTest(configuration, shared_upstream, env))
            _RUNNING[key][1].wait_ready()
        return _RUNNING[key][1]

    yield get
    _stop_shared()


@pytest.fixture(scope="session")
def proxy_serving(
    loop_thread: LoopThread, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., ProxyUnderTest]]:
    """`proxy_serving(document, **options)`: one real proxy process per features document and configuration
    for the tests of tests/http, each against a stub of its own serving that document. Neither may be
    changed: a test that changes the upstream, or reads what it received, starts its own (proxy_factory)."""

    def get(document: dict[str, Any], **options: Any) -> ProxyUnderTest:
        key = json.dumps(["serving", document, options], sort_keys=True)
        if key not in _RUNNING:
            stub = StubUpstream(loop_thread, json.loads(json.dumps(document)))
            env = process_env(tmp_path_factory.mktemp("proxy-serving"))
            _RUNNING[key] = (stub, ProxyUnderTest({"service_url": stub.url, **SHARED, **options}, stub, env))
            _RUNNING[key][1].wait_ready()
        return _RUNNING[key][1]

    yield get
    _stop_shared()


@pytest.fixture
def proxy(shared_proxy: Callable[..., ProxyUnderTest]) -> ProxyUnderTest:
    return shared_proxy()


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


@pytest.fixture
def embedded(upstream: StubUpstream, base_env: dict[str, str]) -> Iterator[Callable[..., EmbeddedProxy]]:
    """`embedded(keywords, logger=..., storage=..., middleware=False, env=..., wait=True, **options)`: a
    program that embeds the proxy (tests/http/embedded.py), for the options that are objects. Without
    `keywords` it is given DEFAULTS and `options` against the test's `upstream`; `keywords` are passed as
    they are."""
    started: list[EmbeddedProxy] = []

    def start(
        keywords: dict[str, Any] | None = None,
        *,
        logger: str | None = None,
        storage: str | None = None,
        middleware: bool = False,
        env: dict[str, str] | None = None,
        wait: bool = True,
        **options: Any,
    ) -> EmbeddedProxy:
        if keywords is None:
            keywords = {"service_url": upstream.url, **DEFAULTS, **options}
        spec = {"keywords": keywords, "logger": logger, "storage": storage, "middleware": middleware}
        started.append(EmbeddedProxy(spec, {**base_env, **(env or {})}, upstream))
        return _waited(started[-1], wait)

    yield start
    for process in started:
        process.stop()
