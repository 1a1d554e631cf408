"""Edge's TLS serving through real `flagproxy edge` processes: HTTPS on --tls-server-port with the given
certificate (checked against the test CA) on every route, nothing on the plain port unless
--redirect-http-to-https makes it answer 308s there, the same with --workers 2, the probes with
--ca-certificate-file, and a missing or unreadable certificate or key as one line and exit 2."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from tests.edge.certificates import TestCA, https_fetch
from tests.edge.harness import CountingUpstream, EdgeProcess, edge, features_doc
from tests.http.loopback import fetch, free_port
from tests.http.processes import sockets_by_process
from tests.server.harness import ServerProcess

DEV_CLIENT = "*:development.tls-client-secret"
DEV_FRONTEND = "*:development.tls-frontend-secret"


@pytest.fixture
def ca(tmp_path: Path) -> TestCA:
    return TestCA(tmp_path / "pki")


def _tls_edge(counting: CountingUpstream, ca: TestCA, *extra: str) -> tuple[EdgeProcess, int]:
    counting.add(DEV_CLIENT, "client", "development", ["*"], features_doc(("f", "default", True)))
    counting.add(DEV_FRONTEND, "frontend", "development", ["*"])
    cert, key = ca.issue("edge")
    tls_port = free_port()
    process = edge(
        counting.url, [DEV_CLIENT], "--tls-enable", "--tls-server-cert", str(cert), *extra,
        env={"TLS_SERVER_KEY": str(key), "TLS_SERVER_PORT": str(tls_port)},
    )  # fmt: skip
    return process, tls_port


def _wait_https_ready(process: EdgeProcess, port: int, ca: TestCA) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        assert process.popen.poll() is None, process.popen.communicate()
        try:
            if (
                https_fetch(port, "GET", "/internal-backstage/ready", ca.client_context(), timeout=1)[0]
                == 200
            ):
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError("the edge never answered ready over HTTPS")


def _refused(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


def _probe(kind: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flagproxy", "edge", kind, *args], capture_output=True, text=True, timeout=30
    )


def test_https_on_the_tls_port_for_every_route_and_nothing_on_the_plain_port(
    counting: CountingUpstream, ca: TestCA
) -> None:
    process, tls_port = _tls_edge(counting, ca)
    try:
        _wait_https_ready(process, tls_port, ca)
        # the ready line names where it serves: the HTTPS port, not the plain one that serves nothing
        assert f"is ready at https://127.0.0.1:{tls_port}:" in process.read_until("is ready at")
        context = ca.client_context()  # checks the chain and that the certificate names 127.0.0.1
        status, _, body = https_fetch(
            tls_port, "GET", "/api/frontend", context, {"Authorization": DEV_FRONTEND}
        )
        assert status == 200 and b'"f"' in body
        status, _, body = https_fetch(
            tls_port, "POST", "/api/frontend", context,
            {"Authorization": DEV_FRONTEND, "Content-Type": "application/json"}, b'{"userId": "1"}',
        )  # fmt: skip
        assert status == 200 and b'"f"' in body
        status, _, body = https_fetch(
            tls_port, "GET", "/api/client/features", context, {"Authorization": DEV_CLIENT}
        )
        assert status == 200 and b'"f"' in body
        assert https_fetch(tls_port, "GET", "/api/frontend", context)[0] == 401
        assert https_fetch(tls_port, "GET", "/no/such/route", context)[0] == 404
        assert https_fetch(tls_port, "GET", "/internal-backstage/metrics", context)[0] == 200
        assert _refused(process.port)  # as in Edge, the plain port serves nothing
        # a client that does not trust the CA is refused in the handshake
        with pytest.raises(OSError):
            https_fetch(
                tls_port, "GET", "/internal-backstage/health", TestCA(ca.folder / "other").client_context()
            )
        url = f"https://127.0.0.1:{tls_port}"
        assert _probe("ready", "--edge-url", url, "--ca-certificate-file", str(ca.ca_file)).returncode == 0
        assert _probe("health", "-e", url).returncode == 1  # the system's CAs do not know the test CA
    finally:
        _, err = process.stop()
    assert process.popen.returncode == 0, err
    assert "Traceback" not in err


@pytest.mark.parametrize("workers", [1, 2])
def test_the_plain_port_redirects_to_https(counting: CountingUpstream, ca: TestCA, workers: int) -> None:
    process, tls_port = _tls_edge(counting, ca, "--redirect-http-to-https", "--workers", str(workers))
    try:
        _wait_https_ready(process, tls_port, ca)
        status, headers, _ = fetch(process.port, "GET", "/api/frontend?userId=7&x=%2F", {"Host": "127.0.0.1"})
        assert status == 308
        assert headers["location"] == f"https://127.0.0.1:{tls_port}/api/frontend?userId=7&x=%2F"
        status, headers, _ = fetch(
            process.port, "POST", "/api/client/metrics", {"Host": f"localhost:{process.port}"}, b"{}"
        )
        assert status == 308 and headers["location"] == f"https://localhost:{tls_port}/api/client/metrics"
        status, headers, _ = fetch(process.port, "GET", "/", {"Host": f"[::1]:{process.port}"})
        assert status == 308 and headers["location"] == f"https://[::1]:{tls_port}/"
        # every worker serves HTTPS on its own socket; the main process answers the redirect
        deadline = time.monotonic() + 20
        while len(sockets_by_process(tls_port, process.popen.pid)["listen"]) < workers:
            assert time.monotonic() < deadline, sockets_by_process(tls_port, process.popen.pid)
            time.sleep(0.05)
        assert set(sockets_by_process(process.port, process.popen.pid)["listen"]) == {process.popen.pid}
        # what the redirect points at answers
        status, _, body = https_fetch(
            tls_port, "GET", "/api/frontend?userId=7", ca.client_context(), {"Authorization": DEV_FRONTEND}
        )
        assert status == 200 and b'"f"' in body
    finally:
        _, err = process.stop(signal.SIGTERM)
    assert process.popen.returncode == 0, err
    assert _refused(process.port) and _refused(tls_port)  # both let go at the stop


def test_the_redirect_without_tls_serves_plain_http_and_says_so(counting: CountingUpstream) -> None:
    """As Edge (it redirects only under --tls-enable) the option changes nothing: --port serves every
    route over plain HTTP, and nothing listens on the TLS port; one WARN line says the option did nothing."""
    counting.add(DEV_CLIENT, "client", "development", ["*"], features_doc(("f", "default", True)))
    tls_port = free_port()
    process = edge(
        counting.url, [DEV_CLIENT], "--tls-server-port", str(tls_port), env={"REDIRECT_HTTP_TO_HTTPS": "true"}
    )
    try:
        process.wait_ready()
        status, _, body = process.get("/api/client/features", DEV_CLIENT)
        assert status == 200 and orjson.loads(body)["features"][0]["name"] == "f"
        assert _refused(tls_port)
    finally:
        out, err = process.stop(signal.SIGTERM)
    assert process.popen.returncode == 0, err
    said = [line for line in out.splitlines() if "does nothing without --tls-enable" in line]
    assert len(said) == 1 and said[0].startswith("WARN: REDIRECT_HTTP_TO_HTTPS does nothing"), out
    assert said[0].endswith("PORT serves plain HTTP"), out  # the harness gives the port as PORT


def _start(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    full = {k: v for k, v in os.environ.items() if not k.startswith("TLS_") and k not in ("PORT", "TOKENS")}
    return subprocess.run(
        [sys.executable, "-m", "flagproxy", "edge", "-u", "http://127.0.0.1:9", "-t", DEV_CLIENT, *args],
        capture_output=True,
        text=True,
        env={**full, **(env or {})},
        timeout=60,
    )


def test_a_missing_unreadable_or_wrong_certificate_or_key_stops_the_start(ca: TestCA, tmp_path: Path) -> None:
    cert, key = ca.issue("edge")
    _, other_key = ca.issue("other")
    not_pem = tmp_path / "notes.txt"
    not_pem.write_text("not a certificate\n")
    cases = [
        (
            ["--tls-enable", "--tls-server-key", str(key)],
            {},
            "--tls-enable needs --tls-server-cert (TLS_SERVER_CERT)",
        ),
        ([], {"TLS_ENABLE": "true", "TLS_SERVER_CERT": str(cert)}, "TLS_ENABLE needs --tls-server-key"),
        (
            ["--tls-enable", "--tls-server-cert", str(tmp_path / "none.crt"), "--tls-server-key", str(key)],
            {},
            f"--tls-server-cert: cannot read {tmp_path / 'none.crt'}: No such file or directory",
        ),
        (
            ["--tls-enable", "--tls-server-cert", str(cert)],
            {"TLS_SERVER_KEY": str(tmp_path)},  # a folder: cannot be read as a file
            f"TLS_SERVER_KEY: cannot read {tmp_path}: Is a directory",
        ),
        (
            ["--tls-enable", "--tls-server-cert", str(not_pem), "--tls-server-key", str(key)],
            {},
            f"--tls-server-cert: {not_pem} holds no PEM certificate",
        ),
        (
            ["--tls-enable", "--tls-server-cert", str(cert), "--tls-server-key", str(not_pem)],
            {},
            f"--tls-server-key: {not_pem} is not the PEM private key of --tls-server-cert's certificate",
        ),
        (
            ["--tls-enable", "--tls-server-cert", str(cert), "--tls-server-key", str(other_key)],
            {},
            f"--tls-server-key: {other_key} is not the PEM private key of --tls-server-cert's certificate",
        ),
        (
            ["--tls-enable", "--tls-server-cert", str(cert), "--tls-server-key", str(key)],
            {"TLS_SERVER_PORT": "70000"},
            "TLS_SERVER_PORT: must be between 1 and 65535",
        ),
        (
            ["--tls-enable", "--tls-server-cert", str(cert), "--tls-server-key", str(key), "-p", "3043"],
            {"REDIRECT_HTTP_TO_HTTPS": "true"},
            "--tls-server-port and --port: the HTTPS and the redirecting port must differ",
        ),
    ]
    for args, env, said in cases:
        answer = _start(*args, env=env)
        lines = answer.stderr.strip().splitlines()
        assert answer.returncode == 2 and len(lines) == 1, (args, env, answer.stderr)
        assert lines[0].startswith(f"flagproxy edge: {said}"), (said, answer.stderr)


def test_a_taken_tls_port_is_one_line(ca: TestCA) -> None:
    cert, key = ca.issue("edge")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        answer = _start(
            "-i", "127.0.0.1", "--tls-enable", "--tls-server-cert", str(cert), "--tls-server-key", str(key),
            "--tls-server-port", str(port),
        )  # fmt: skip
    assert answer.returncode == 2, answer
    assert answer.stderr.startswith(f"flagproxy edge: --tls-server-port: cannot listen on 127.0.0.1:{port}: ")


def test_a_chain_over_https_from_a_real_server(upstream_server: ServerProcess, ca: TestCA) -> None:
    """`flagproxy server` ← edge A serving HTTPS ← edge B trusting A's CA with --upstream-certificate-file:
    the real validation, features and usage contract, over TLS, with a custom header on B's requests."""
    from tests.edge.conftest import DEV_CLIENT as SERVER_CLIENT
    from tests.edge.conftest import DEV_FRONTEND as SERVER_FRONTEND

    cert, key = ca.issue("edge-a")
    tls_port = free_port()
    first = edge(
        upstream_server.url, [SERVER_CLIENT], "--tls-enable", "--tls-server-cert", str(cert),
        "--tls-server-key", str(key), "--tls-server-port", str(tls_port),
    )  # fmt: skip
    second = None
    try:
        _wait_https_ready(first, tls_port, ca)
        second = edge(
            f"https://127.0.0.1:{tls_port}", [SERVER_CLIENT], "--upstream-certificate-file", str(ca.ca_file),
            "-H", "X-Hop: b",
        )  # fmt: skip
        second.wait_ready()
        status, _, body = second.get("/api/frontend/all?userId=3", SERVER_FRONTEND)
        assert status == 200 and b'"everywhere"' in body
        at_first = https_fetch(
            tls_port,
            "GET",
            "/api/frontend/all?userId=3",
            ca.client_context(),
            {"Authorization": SERVER_FRONTEND},
        )
        assert at_first[0] == 200 and at_first[2] == body
    finally:
        if second is not None:
            second.stop()
        first.stop()
    assert first.popen.returncode == 0 and (second is None or second.popen.returncode == 0)


def test_offline_mode_serves_https_too(ca: TestCA, tmp_path: Path) -> None:
    bootstrap = tmp_path / "features.json"
    bootstrap.write_bytes(orjson.dumps(features_doc(("offline-flag", "default", True))))
    cert, key = ca.issue("edge-offline")
    tls_port = free_port()
    process = EdgeProcess(
        ["offline", "--bootstrap-file", str(bootstrap), "--tokens", DEV_CLIENT, "--tls-enable"],
        env={"TLS_SERVER_CERT": str(cert), "TLS_SERVER_KEY": str(key), "TLS_SERVER_PORT": str(tls_port)},
    )
    try:
        _wait_https_ready(process, tls_port, ca)
        status, _, body = https_fetch(
            tls_port, "GET", "/api/client/features", ca.client_context(), {"Authorization": DEV_CLIENT}
        )
        assert status == 200 and b'"offline-flag"' in body
        assert _refused(process.port)
    finally:
        _, err = process.stop()
    assert process.popen.returncode == 0, err
