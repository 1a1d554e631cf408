"""The pytest plugin that takes the campaign's figures (figures.py) while its tests run.

Loaded by `python -m tests.reliability` (and by tests/reliability/conftest.py, so the tests of this folder
count under plain pytest too). It wraps, for the whole test process:

- `http.client.HTTPConnection.getresponse`: every answer a test reads, by status; a 503 is the documented
  not-ready answer when it is the proxy's HTML page, or `flagproxy edge`'s on the routes docs/edge.md gives
  it (EDGE_503), and edge's 511 for a frontend token no client token covers is documented too (EDGE_511);
  any other 5xx is listed as unexpected. Edge's ports are known from tests/edge/harness.py's EdgeProcess;
- the loopback upstreams' features, metrics and (edge's) /edge/validate handlers: every answer that was a
  fault, by kind (an edge's upstream's kinds start with "edge upstream");
- `socket.create_connection`: connections opened, so a raw-socket family counts what it sent;

and attributes each test's requests to its family of hostile input (FAMILIES).
"""

from __future__ import annotations

import functools
import http.client
import socket
from typing import Any

import pytest

from tests.edge import harness
from tests.http import loopback
from tests.reliability import edge_upstream
from tests.reliability.figures import FIGURES

# Tests of main's own modules that the campaign runs, and what they send: "answers" counts the HTTP answers
# the test read, "raw" the connections it opened that were not plain HTTP requests.
FAMILIES = {
    "tests/http/test_fuzz.py::test_generated_requests": ("proxy: generated requests (hypothesis)", "answers"),
    "tests/http/test_fuzz.py::test_malformed_http": ("proxy: malformed HTTP on a raw socket", "raw"),
    "tests/http/test_fuzz.py::test_slowloris": ("proxy: slowloris partial requests", "raw"),
    "tests/http/test_bad_input.py": ("proxy: the bad input table", "answers"),
}

# `flagproxy edge`'s documented 5xx (docs/edge.md), by the route prefixes that may answer them: 503 while the
# token's environment has no flags yet (the data routes), not ready, or a new token the upstream cannot be
# asked about (/edge/validate); 511 for a frontend token no --tokens client token covers.
EDGE_503 = (
    "/api/frontend",
    "/api/proxy",
    "/api/client/features",
    "/edge/validate",
    "/internal-backstage/ready",
)
EDGE_511 = ("/api/frontend", "/api/proxy")
EDGE_PORTS: set[int] = set()

_connections = 0


def _documented_edge(status: int, path: str) -> bool:
    path = path.partition("?")[0]
    prefixes = EDGE_503 if status == 503 else EDGE_511 if status == 511 else ()
    return any(path == prefix or path.startswith(prefix + "/") for prefix in prefixes)


def _count_answer(getresponse: Any) -> Any:
    @functools.wraps(getresponse)
    def counted(self: http.client.HTTPConnection) -> http.client.HTTPResponse:
        response = getresponse(self)
        FIGURES.requests += 1
        FIGURES.statuses[response.status] += 1
        path = getattr(self, "_campaign_path", "")
        if response.status == 503 and (response.getheader("content-type") or "").startswith("text/html"):
            FIGURES.not_ready_503 += 1
        elif self.port in EDGE_PORTS and _documented_edge(response.status, path):
            if response.status == 503:
                FIGURES.not_ready_503 += 1
            else:
                FIGURES.not_covered_511 += 1
        elif response.status >= 500:
            FIGURES.unexpected_5xx.append(f"{response.status} from port {self.port} ({path[:80]})")
        return response

    return counted


def _remember_path(putrequest: Any) -> Any:
    """The request's target, so a 5xx can be judged by its route."""

    @functools.wraps(putrequest)
    def remembered(self: http.client.HTTPConnection, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        self._campaign_path = url  # type: ignore[attr-defined]
        return putrequest(self, method, url, *args, **kwargs)

    return remembered


def _know_edge_port(init: Any) -> Any:
    @functools.wraps(init)
    def known(self: harness.EdgeProcess, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        EDGE_PORTS.add(self.port)

    return known


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


def _labelled(upstream: loopback.StubUpstream, kind: str) -> str:
    label = getattr(upstream, "label", "")
    return f"{label}: {kind}" if label else kind


def _features_fault(upstream: loopback.StubUpstream) -> str | None:
    if upstream.features_status != 200:
        return _labelled(upstream, f"features answered {upstream.features_status}")
    if upstream.fault:
        return _labelled(upstream, f"features: {upstream.fault}")
    if upstream.delay:
        return _labelled(upstream, "features: no answer within the timeout")
    return None


def _metrics_fault(upstream: loopback.StubUpstream) -> str | None:
    if upstream.post_status >= 400:
        return _labelled(upstream, f"metrics answered {upstream.post_status}")
    return None


def _validate_fault(upstream: edge_upstream.EdgeUpstream) -> str | None:
    if upstream.validate_status != 200:
        return _labelled(upstream, f"/edge/validate answered {upstream.validate_status}")
    if upstream.validate_fault:
        return _labelled(upstream, f"/edge/validate: {upstream.validate_fault}")
    return None


_installed = False


def install() -> None:
    """Wrap once per process, whether loaded by the runner, a conftest, or both."""
    global _installed
    if _installed:
        return
    _installed = True
    http.client.HTTPConnection.getresponse = _count_answer(http.client.HTTPConnection.getresponse)
    http.client.HTTPConnection.putrequest = _remember_path(http.client.HTTPConnection.putrequest)
    harness.EdgeProcess.__init__ = _know_edge_port(harness.EdgeProcess.__init__)  # type: ignore[method-assign]
    socket.create_connection = _count_connection(socket.create_connection)
    stub = loopback.StubUpstream
    stub._features = _count_faults(stub._features, _features_fault)
    stub._post = _count_faults(stub._post, _metrics_fault)
    edge_stub = edge_upstream.EdgeUpstream
    edge_stub._validate = _count_faults(edge_stub._validate, _validate_fault)  # type: ignore[method-assign]


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
