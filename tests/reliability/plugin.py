"""The pytest plugin that takes the campaign's figures (figures.py) while its tests run.

Loaded by `python -m tests.reliability` (and by tests/reliability/conftest.py, so the tests of this folder
count under plain pytest too). It wraps, for the whole test process:

- `http.client.HTTPConnection.getresponse`: every answer a test reads, by status; a 503 is the documented
  not-ready answer when it is the proxy's HTML page, any other 5xx is listed as unexpected;
- the loopback upstream's features and metrics handlers: every answer that was a fault, by kind;
- `socket.create_connection`: connections opened, so a raw-socket family counts what it sent;

and attributes each test's requests to its family of hostile input (FAMILIES).
"""

from __future__ import annotations

import functools
import http.client
import socket
from typing import Any

import pytest

from tests.http import loopback
from tests.reliability.figures import FIGURES

# Tests of main's own modules that the campaign runs, and what they send: "answers" counts the HTTP answers
# the test read, "raw" the connections it opened that were not plain HTTP requests.
FAMILIES = {
    "tests/http/test_fuzz.py::test_generated_requests": ("proxy: generated requests (hypothesis)", "answers"),
    "tests/http/test_fuzz.py::test_malformed_http": ("proxy: malformed HTTP on a raw socket", "raw"),
    "tests/http/test_fuzz.py::test_slowloris": ("proxy: slowloris partial requests", "raw"),
    "tests/http/test_bad_input.py": ("proxy: the bad input table", "answers"),
}

_connections = 0


def _count_answer(getresponse: Any) -> Any:
    @functools.wraps(getresponse)
    def counted(self: http.client.HTTPConnection) -> http.client.HTTPResponse:
        response = getresponse(self)
        FIGURES.requests += 1
        FIGURES.statuses[response.status] += 1
        if response.status == 503 and (response.getheader("content-type") or "").startswith("text/html"):
            FIGURES.not_ready_503 += 1
        elif response.status >= 500:
            FIGURES.unexpected_5xx.append(f"{response.status} from port {self.port}")
        return response

    return counted


def _count_connection(create_connection: Any) -> Any:
    @functools.wraps(create_connection)
    def counted(*args: Any, **kwargs: Any) -> socket.socket:
        global _connections
        _connections += 1
        return create_connection(*args, **kwargs)

    return counted


def _count_faults(handler: Any, kind_of: Any) -> Any:
    @functools.wraps(handler)
    async def counted(self: loopback.StubUpstream, request: Any) -> Any:
        kind = kind_of(self)
        if kind:
            FIGURES.faults[kind] += 1
        return await handler(self, request)

    return counted


def _features_fault(upstream: loopback.StubUpstream) -> str | None:
    if upstream.features_status != 200:
        return f"features answered {upstream.features_status}"
    if upstream.fault:
        return f"features: {upstream.fault}"
    if upstream.delay:
        return "features: no answer within the timeout"
    return None


def _metrics_fault(upstream: loopback.StubUpstream) -> str | None:
    return f"metrics answered {upstream.post_status}" if upstream.post_status >= 400 else None


_installed = False


def install() -> None:
    """Wrap once per process, whether loaded by the runner, a conftest, or both."""
    global _installed
    if _installed:
        return
    _installed = True
    http.client.HTTPConnection.getresponse = _count_answer(http.client.HTTPConnection.getresponse)
    socket.create_connection = _count_connection(socket.create_connection)
    stub = loopback.StubUpstream
    stub._features = _count_faults(stub._features, _features_fault)
    stub._post = _count_faults(stub._post, _metrics_fault)


install()


def _family(nodeid: str) -> tuple[str, str] | None:
    for prefix, family in FAMILIES.items():
        if nodeid.startswith(prefix):
            return family
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    family = _family(item.nodeid)
    answers, connections = FIGURES.requests, _connections
    try:
        return (yield)
    finally:
        if family is not None:
            name, measure = family
            read = FIGURES.requests - answers
            opened = _connections - connections
            FIGURES.hostile_input(name, read if measure == "answers" else max(0, opened - read))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        FIGURES.tests[report.outcome] += 1
        if report.outcome == "failed":
            FIGURES.failures.append(report.nodeid)
