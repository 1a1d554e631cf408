"""A misbehaving upstream, as a real `flagproxy edge` meets it (tests/reliability/edge_upstream.py: main's
loopback upstream and its FAULTS, plus /edge/validate and the bulk metrics endpoint).

Features: 500 and 429 storms, malformed JSON, JSON of the wrong shape, a body cut short, no answer within
--upstream-request-timeout (all of main's cases in --long), and the upstream gone altogether: edge keeps
serving the last flags with the same answers, /internal-backstage/health and ready stay 200, and once the
upstream answers again the next revision is served. Token validation: /edge/validate answering 5xx, 429,
404 or unreadable JSON while edge revalidates every second, and the upstream gone: tokens validated
before are still served with the same answers, a new token gets the documented 401 (and POST
/edge/validate the documented 503 for it), and once validation answers again the new token is served.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.edge.harness import EdgeProcess, edge
from tests.http.loopback import fetch
from tests.http.test_upstream_faults import CASES, CLEAR, set_upstream
from tests.reliability.edge_upstream import DEV_CLIENT, DEV_FRONTEND, EdgeUpstream
from tests.reliability.figures import FIGURES
from tests.reliability.scale import LONG

pytestmark = pytest.mark.slow

SHORT_CASES = [
    "answered 500",
    "sent invalid JSON",
    "without a `features` list",
    "ClientPayloadError",
    "timed out",
]
FEATURE_FAULTS: list[dict[str, Any]] = [
    fault for fault, said in CASES if LONG or (said in SHORT_CASES and "delay" not in fault)
] + [{"features_status": 429}]
VALIDATE_FAULTS: list[dict[str, Any]] = [
    {"validate_status": 503},
    {"validate_status": 500},
    {"validate_status": 429},
    {"validate_status": 404},
    {"validate_fault": "malformed JSON"},
]
VALIDATE_CLEAR = {"validate_status": 200, "validate_fault": None}


@pytest.fixture
def edge_upstream(loop_thread) -> Iterator[EdgeUpstream]:
    stub = EdgeUpstream(loop_thread)
    yield stub
    stub.stop()


def answers(port: int) -> list[tuple[str, int, bytes]]:
    """What SDKs with tokens validated before see, and what a downstream edge asks about them."""
    found = []
    for method, path, token, body in (
        ("GET", "/api/frontend?userId=u1", DEV_FRONTEND, None),
        ("POST", "/api/frontend/all", DEV_FRONTEND, b'{"context": {"userId": "u2"}}'),
        ("GET", "/api/client/features", DEV_CLIENT, None),
        ("POST", "/edge/validate", None, json.dumps({"tokens": [DEV_CLIENT, DEV_FRONTEND]}).encode()),
        ("GET", "/internal-backstage/health", None, None),
        ("GET", "/internal-backstage/ready", None, None),
    ):
        headers = {"Content-Type": "application/json"} if body else {}
        if token:
            headers["Authorization"] = token
        status, _, answer = fetch(port, method, path, headers, body)
        found.append((path, status, answer))
    return found


def wait_until(condition: Any, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def serves(process: EdgeProcess, flag: str) -> bool:
    status, _, body = fetch(process.port, "GET", "/api/frontend?userId=u1", {"Authorization": DEV_FRONTEND})
    return status == 200 and f'"{flag}"'.encode() in body


def finish(process: EdgeProcess) -> None:
    FIGURES.watch(1, 0 if process.popen.poll() is None else 1)
    stdout, stderr = process.stop()
    assert process.popen.returncode == 0, stderr[-3000:]
    assert "Traceback" not in stdout + stderr, (stdout + stderr)[-3000:]


def test_features_faults_and_an_upstream_gone_keep_the_last_flags_then_the_next_revision(edge_upstream):
    upstream = edge_upstream
    process = edge(upstream.base_url, [DEV_CLIENT], "--upstream-request-timeout", "1")
    try:
        process.wait_ready()
        for number, fault in enumerate([*FEATURE_FAULTS, "down"]):
            good = answers(process.port)
            assert {status for _, status, _ in good} == {200}, good
            if fault == "down":
                upstream.down()
                time.sleep(4)  # several polls, validations and metrics sends refused
                FIGURES.notes["edge: upstream gone"] = "4 s refused, the last flags served meanwhile"
            else:
                set_upstream(upstream, fault)
                polls = len(upstream.received("/api/client/features"))
                # A storm: several polls meet the fault (the backoff grows, so allow for it).
                upstream.wait_for("/api/client/features", polls + 2, timeout=40)
            assert answers(process.port) == good, fault
            upstream.revise(f"after-fault-{number}")
            if fault == "down":
                upstream.up()
            else:
                set_upstream(upstream, CLEAR)
            wait_until(lambda n=number: serves(process, f"after-fault-{n}"), f"no recovery after {fault}", 40)
    finally:
        finish(process)


def test_validation_failing_upstream_never_turns_validated_tokens_away(edge_upstream):
    upstream = edge_upstream
    process = edge(
        upstream.base_url,
        [DEV_CLIENT],
        "--token-revalidation-interval-seconds",
        "1",
        "--upstream-request-timeout",
        "1",
    )
    try:
        process.wait_ready()
        good = answers(process.port)
        assert {status for _, status, _ in good} == {200}, good
        assert DEV_FRONTEND.encode() in good[3][2]
        for number, fault in enumerate([*VALIDATE_FAULTS, "down"]):
            newcomer = f"*:development.campaign-newcomer-{number}"
            upstream.tokens[newcomer] = ("frontend", "development", ["*"])
            calls = upstream.validate_calls
            if fault == "down":
                upstream.down()
                time.sleep(3)  # three revalidations refused
            else:
                set_upstream(upstream, fault)
                # Revalidations of the known tokens meet the fault (one a second).
                wait_until(lambda c=calls: upstream.validate_calls > c, f"no revalidation under {fault}")
                time.sleep(2.5)
            assert answers(process.port) == good, fault
            # A token never seen: nobody can say whether it is valid (401, and 503 from /edge/validate).
            ask = {"Authorization": newcomer}
            assert fetch(process.port, "GET", "/api/frontend", ask)[0] == 401, fault
            body = json.dumps({"tokens": [newcomer]}).encode()
            validate = fetch(
                process.port, "POST", "/edge/validate", {"Content-Type": "application/json"}, body
            )
            assert validate[0] == 503, (fault, validate)
            if fault == "down":
                upstream.up()
            else:
                set_upstream(upstream, VALIDATE_CLEAR)
            wait_until(
                lambda t=newcomer: (
                    fetch(process.port, "GET", "/api/frontend", {"Authorization": t})[0] == 200
                ),
                f"the new token is not served after {fault}",
            )
            assert answers(process.port) == good, fault
    finally:
        finish(process)
