"""Raw-socket malformed HTTP (main's MALFORMED_HTTP and the campaign's own, test_malformed_http.py) and
slowloris connections that never finish, against a real `flagproxy edge` on each of its route families:
every input is refused with a 4xx or closed without an answer, the process is not lost, the same requests
get the same answers while the slowloris connections hang and afterwards, and no traceback is logged."""

from __future__ import annotations

import socket

import pytest

from tests.edge.conftest import DEV_CLIENT, DEV_FRONTEND
from tests.edge.harness import edge
from tests.http.hostile import send_raw
from tests.http.loopback import fetch
from tests.reliability.figures import FIGURES
from tests.reliability.test_malformed_http import CONTROL_BYTE_TARGETS, SLOWLORIS, send_malformed

pytestmark = pytest.mark.slow

FAMILY = "edge: malformed HTTP on a raw socket"
# (the path the raw inputs aim at, a request that must keep its answer, its token)
TARGETS = [
    (b"/api/frontend", "/api/frontend?userId=u1", DEV_FRONTEND),
    (b"/api/client/features", "/api/client/features", DEV_CLIENT),
    (b"/api/client/metrics", "/internal-backstage/health", None),
    (b"/edge/validate", "/internal-backstage/ready", None),
]


def answers(port: int) -> set[tuple[str, int, bytes]]:
    found = set()
    for _, path, token in TARGETS:
        status, _, body = fetch(port, "GET", path, {"Authorization": token} if token else {})
        found.add((path, status, body))
    return found


def test_edge_refuses_malformed_http_and_slowloris_and_keeps_its_answers(upstream_server):
    process = edge(upstream_server.url, [DEV_CLIENT])
    try:
        process.wait_ready()
        before = answers(process.port)
        assert {status for _, status, _ in before} == {200}, before
        for target, _, _ in TARGETS:
            send_malformed(process.port, target, FAMILY)
        assert answers(process.port) == before
        hanging = []
        try:
            for number in range(SLOWLORIS):
                target = TARGETS[number % len(TARGETS)][0]
                sock = socket.create_connection(("127.0.0.1", process.port), timeout=5)
                sock.sendall(b"POST " + target + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
                hanging.append(sock)
            FIGURES.hostile_input("edge: slowloris connections on a raw socket", SLOWLORIS)
            assert answers(process.port) == before
        finally:
            for sock in hanging:
                sock.close()
        assert answers(process.port) == before
    finally:
        FIGURES.watch(1, 0 if process.popen.poll() is None else 1)
        stdout, stderr = process.stop()
    assert process.popen.returncode == 0, stderr[-3000:]
    assert "Traceback" not in stdout + stderr, (stdout + stderr)[-3000:]


# --- regression: what this campaign found -----------------------------------------------------------


def test_a_control_byte_in_the_request_target_gets_a_400_from_edge_and_no_traceback(upstream_server):
    """Found by this campaign: edge's app lacked the request class the proxy and the server got for this
    (flagproxy/http/request.py), so Sanic closed the connection without an answer and logged a traceback
    per request."""
    process = edge(upstream_server.url, [DEV_CLIENT], "--log-level", "debug")
    try:
        process.wait_ready()
        for target in [*CONTROL_BYTE_TARGETS, b"/api/front\x00end", b"/edge/validate\x01"]:
            answer = send_raw(process.port, b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n\r\n")
            assert answer.startswith(b"HTTP/1.1 400 "), (target, answer[:200])
    finally:
        stdout, stderr = process.stop()
    assert "Traceback" not in stdout + stderr, (stdout + stderr)[-3000:]
