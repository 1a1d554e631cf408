"""Raw-socket malformed HTTP against real processes with two workers each, `flagproxy proxy --workers 2` and
`flagproxy server --workers 2`: bad request lines, broken chunked bodies, conflicting lengths, oversized
headers, and slowloris connections that never finish. Every input is refused with a 4xx or closed without
an answer, no worker is lost or replaced, and the same request gets the same answer afterwards."""

from __future__ import annotations

import http.client
import socket
import time

import pytest

from tests.http.hostile import MALFORMED_HTTP, send_raw
from tests.http.loopback import KEY
from tests.http.test_workers import proxy_env
from tests.reliability.figures import FIGURES
from tests.reliability.processes import children
from tests.server.harness import CLIENT_TOKEN, ServerProcess, base_env

pytestmark = pytest.mark.slow

CHUNKED_HEAD = (
    b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
)
# Beyond main's list: more ways to break a chunked body and the request line.
MORE = [
    CHUNKED_HEAD + b"\r\nFFFFFFFFFFFFFFFFFF\r\n{}\r\n0\r\n\r\n",  # a chunk size past any integer
    CHUNKED_HEAD + b"\r\n2;ext=\x00\r\n{}\r\n0\r\n\r\n",  # a NUL in a chunk extension
    CHUNKED_HEAD + b"\r\n2\r\n{}\r\n",  # no last chunk: the body never ends
    CHUNKED_HEAD + b"\r\n2\r\n{}\r\n0\r\nTrailer without colon\r\n\r\n",  # a broken trailer
    CHUNKED_HEAD + b"Content-Length: 2\r\n\r\n2\r\n{}\r\n0\r\n\r\n",  # both framings (smuggling)
    b"POST %s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked, identity\r\n\r\n0\r\n\r\n",
    b"GET %s?" + b"a" * 20000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",  # a request line past the header limit
    b"GET %s HTTP/1.1\r\nHost: x\r\nX: \xff\xfe\x00\r\n\r\n",  # header bytes that are not text
    b"\r\n\r\n\r\n",
    b"GET %s HTTP/1.1\nHost: x\n\n",  # bare line feeds
    b"G\xc3\x89T %s HTTP/1.1\r\nHost: x\r\n\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64,  # a TLS hello on the plain port
]
SLOWLORIS = 150


def inputs(path: bytes) -> list[bytes]:
    ours = [data.replace(b"%s", path) for data in MORE]
    return [data.replace(b"/proxy", path) for data in MALFORMED_HTTP] + ours


def ask(port: int, path: str, token: str) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path, headers={"Authorization": token})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def send_malformed(port: int, path: bytes, family: str) -> None:
    for data in inputs(path):
        answer = send_raw(port, data)
        if answer:
            status = int(answer.split(b" ", 2)[1])
            assert 400 <= status < 500, (data[:80], answer[:300])
        FIGURES.hostile_input(family)


def hammer_and_compare(port: int, path: str, token: str, pid: int, family: str) -> None:
    """Every malformed input, then SLOWLORIS partial requests held open: the same answers, from the same
    workers, before, while they hang, and after."""
    workers = _two_workers(pid)
    before = {ask(port, path, token) for _ in range(8)}
    assert len(before) == 1 and next(iter(before))[0] == 200, before
    target = path.partition("?")[0].encode()
    send_malformed(port, target, family)
    hanging = []
    try:
        for _ in range(SLOWLORIS):
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.sendall(b"POST " + target + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
            hanging.append(sock)
        FIGURES.hostile_input(family.replace("malformed HTTP", "slowloris connections"), SLOWLORIS)
        assert {ask(port, path, token) for _ in range(8)} == before
    finally:
        for sock in hanging:
            sock.close()
    assert {ask(port, path, token) for _ in range(8)} == before
    FIGURES.watch(len(workers), len(workers - children(pid)))
    assert children(pid) == workers, "a worker was lost or replaced"


def test_the_proxy_refuses_malformed_http_and_loses_no_worker(launch, upstream):
    process = launch(proxy_env(upstream), ["--workers", "2"])
    process.wait_ready()
    family = "proxy: malformed HTTP on a raw socket, 2 workers"
    hammer_and_compare(process.port, "/proxy?userId=u1", KEY, process.popen.pid, family)


def test_the_server_refuses_malformed_http_and_loses_no_worker(tmp_path):
    server = ServerProcess(
        base_env(DATABASE_PATH=str(tmp_path / "flags.db")), ["--workers", "2"], log_path=str(tmp_path / "log")
    ).start()
    try:
        assert server.process is not None
        family = "server: malformed HTTP on a raw socket, 2 workers"
        hammer_and_compare(server.port, "/api/client/features", CLIENT_TOKEN, server.process.pid, family)
    finally:
        assert server.stop() == 0
    log = (tmp_path / "log").read_text()
    assert "Traceback" not in log, log[-3000:]


def _two_workers(pid: int) -> set[int]:
    deadline = time.monotonic() + 20
    while len(children(pid)) < 2:
        assert time.monotonic() < deadline, children(pid)
        time.sleep(0.05)
    return children(pid)


# --- regression: what this campaign found -----------------------------------------------------------

CONTROL_BYTE_TARGETS = [b"/pro\x00xy", b"/proxy?userId=\x01", b"/api/client/features\x7f"]


def test_a_control_byte_in_the_request_target_gets_a_400_and_no_traceback(launch, upstream, tmp_path):
    """Found by this campaign: Sanic built its stand-in error request from the same bad target, raised
    again, closed the connection without an answer and logged a traceback per request, in both apps
    (fixed by flagproxy/http/request.py)."""
    proxy = launch(proxy_env(upstream, LOG_LEVEL="debug"), ["--workers", "2"])
    proxy.wait_ready()
    server = ServerProcess(
        base_env(DATABASE_PATH=str(tmp_path / "f.db")), log_path=str(tmp_path / "log")
    ).start()
    try:
        for port in (proxy.port, server.port):
            for target in CONTROL_BYTE_TARGETS:
                answer = send_raw(port, b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n\r\n")
                assert answer.startswith(b"HTTP/1.1 400 "), (port, target, answer[:200])
    finally:
        assert server.stop() == 0
    stdout, stderr = proxy.stop()
    assert "Traceback" not in stdout + stderr, stdout + stderr
    assert "Traceback" not in (tmp_path / "log").read_text()
