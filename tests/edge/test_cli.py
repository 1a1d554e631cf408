"""`flagproxy edge` start-up: --help, bad options, start-up tokens, readiness, the health/ready probes."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from flagproxy.edge.settings import EDGE, OFFLINE, OPTIONS
from tests.edge.conftest import DEV_CLIENT, DEV_FRONTEND
from tests.edge.harness import EdgeProcess, edge
from tests.http.loopback import free_port
from tests.server.harness import ServerProcess, base_env


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    full = {k: v for k, v in os.environ.items() if k not in ("UPSTREAM_URL", "TOKENS", "PORT")}
    return subprocess.run(
        [sys.executable, "-m", "flagproxy", "edge", *args],
        capture_output=True,
        text=True,
        env={**full, **(env or {})},
        timeout=60,
    )


@pytest.mark.parametrize("mode", [EDGE, OFFLINE])
def test_help_lists_every_option_with_its_variable_and_default(mode: str) -> None:
    answer = run(*([] if mode == EDGE else [mode]), "--help")
    assert answer.returncode == 0
    text = " ".join(answer.stdout.split())
    for option in OPTIONS:
        if mode in option.modes:
            assert option.flag in text, option.flag
            assert f"env {option.env}; default: {option.default_text()}" in text, option.key
    assert (
        "flagproxy edge" in run("--help").stdout
        and "edge"
        in subprocess.run(
            [sys.executable, "-m", "flagproxy", "--help"], capture_output=True, text=True
        ).stdout
    )


@pytest.mark.parametrize(
    ("args", "env", "names"),
    [
        ([], {}, "--upstream-url"),
        (["--upstream-url", "ftp://x"], {}, "--upstream-url"),
        (["--upstream-url", "http://x/api"], {}, "/api"),
        (["--upstream-url", "http://x"], {}, "--tokens"),
        (["--upstream-url", "http://x", "--tokens", "nope"], {}, "--tokens: entry 1"),
        (["--upstream-url", "http://x", "--tokens", DEV_CLIENT, "--port", "0"], {}, "--port"),
        (["--upstream-url", "http://x", "--tokens", DEV_CLIENT], {"PORT": "many"}, "PORT"),
        (["--upstream-url", "http://x", "--tokens", DEV_CLIENT, "--workers", "0"], {}, "--workers"),
        (["--upstream-url", "http://x", "--tokens", DEV_CLIENT], {"WORKERS": "two"}, "WORKERS"),
        (
            ["--upstream-url", "http://x", "--tokens", DEV_CLIENT, "--allow-list", "10.0.0.0/33"],
            {},
            "--allow-list",
        ),
        (
            ["--upstream-url", "http://x", "--tokens", DEV_CLIENT, "--trust-proxy", "maybe"],
            {},
            "--trust-proxy",
        ),
        (["--upstream-url", "http://x", "--strict", "--dynamic"], {}, "--strict and --dynamic"),
        (["--upstream-url", "http://x", "--tokens", DEV_CLIENT, "--no-such"], {}, "--no-such"),
        (["offline"], {}, "--bootstrap-file"),
        (
            ["-u", "http://x", "-t", DEV_CLIENT, "-H", "X-Key"],
            {},
            "--custom-client-headers: entry 1 is not `Name: value`",
        ),
        (
            ["-u", "http://x", "-t", DEV_CLIENT],
            {"CUSTOM_CLIENT_HEADERS": "X-A: 1,Bad Name: 2"},
            "CUSTOM_CLIENT_HEADERS: entry 2",
        ),
        (["-u", "http://x", "-t", DEV_CLIENT], {"CUSTOM_CLIENT_HEADERS": "X-A: 1\r\nX-B: 2"}, "entry 1"),
        (["-u", "http://x", "-t", DEV_CLIENT, "--upstream-auth-header", "a b"], {}, "--upstream-auth-header"),
        (["-u", "http://x", "-t", DEV_CLIENT], {"EDGE_AUTH_HEADER": "x:y"}, "EDGE_AUTH_HEADER"),
        (
            ["-u", "http://x", "-t", DEV_CLIENT, "--token-header", "X-T", "--upstream-auth-header", "X-U"],
            {},
            "--token-header and --upstream-auth-header: choose one",
        ),
        (
            ["-u", "http://x", "-t", DEV_CLIENT, "--token-header", "X-T"],
            {"EDGE_AUTH_HEADER": "X-E"},
            "--token-header and EDGE_AUTH_HEADER: choose one",
        ),
        # A value out of range is named as written: the variable when it came from the environment
        (
            ["--upstream-url", "http://x", "--tokens", DEV_CLIENT],
            {"FEATURES_REFRESH_INTERVAL_SECONDS": "0"},
            "flagproxy edge: FEATURES_REFRESH_INTERVAL_SECONDS: must be at least 1",
        ),
        (
            ["--upstream-url", "http://x", "--tokens", DEV_CLIENT, "--port", "0"],
            {},
            "flagproxy edge: --port: must be between 1 and 65535",
        ),
        (
            ["offline", "--bootstrap-file", "/nonexistent.json", "--tokens", DEV_CLIENT],
            {},
            "--bootstrap-file",
        ),
    ],
)
def test_a_bad_option_is_one_line_and_exit_2(args: list[str], env: dict[str, str], names: str) -> None:
    answer = run(*args, env=env)
    assert answer.returncode == 2, answer
    lines = answer.stderr.strip().splitlines()
    assert len(lines) == 1 and names in lines[0], answer.stderr
    assert "Traceback" not in answer.stderr
    assert DEV_CLIENT.split(".")[1] not in answer.stderr  # never a secret


def test_a_taken_port_is_named_as_given() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        by_flag = run("--upstream-url", "http://x", "--tokens", DEV_CLIENT, "--port", port, "-i", "127.0.0.1")
        by_env = run(
            "--upstream-url", "http://x", "--tokens", DEV_CLIENT, env={"PORT": port, "INTERFACE": "127.0.0.1"}
        )
    assert by_flag.returncode == by_env.returncode == 2, (by_flag, by_env)
    assert by_flag.stderr.startswith(f"flagproxy edge: --port: cannot listen on 127.0.0.1:{port}: ")
    assert by_env.stderr.startswith(f"flagproxy edge: PORT: cannot listen on 127.0.0.1:{port}: ")


def test_start_up_tokens_the_upstream_refuses_stop_the_start(upstream_server: ServerProcess) -> None:
    refused = run("--upstream-url", upstream_server.url, "--tokens", f"{DEV_CLIENT},*:development.made-up")
    assert refused.returncode == 2 and "entry 2 (*:development.****) is not a valid token" in refused.stderr
    frontend = run("--upstream-url", upstream_server.url, "--tokens", DEV_FRONTEND)
    assert frontend.returncode == 2 and "frontend token" in frontend.stderr
    assert "test-frontend-secret" not in frontend.stderr


def test_not_ready_until_the_upstream_answers_then_ready(tmp_path: Path) -> None:
    port = free_port()
    # The upstream is not there yet: the edge starts, is healthy, and says it is not ready.
    process = edge(f"http://127.0.0.1:{port}", [DEV_CLIENT])
    try:
        process.wait_listening()
        assert process.get("/internal-backstage/ready")[0] == 503
        assert process.get("/api/frontend", DEV_FRONTEND)[0] == 401  # nobody could validate it
        probe = run("ready", "--edge-url", f"http://127.0.0.1:{process.port}")
        assert probe.returncode == 1
        health = run("health", "--edge-url", f"http://127.0.0.1:{process.port}")
        assert health.returncode == 0, health
    finally:
        process.stop()
    upstream = ServerProcess(base_env(DATABASE_PATH=str(tmp_path / "flags.db")), port=port, log_path=None)
    process = edge(f"http://127.0.0.1:{port}", [DEV_CLIENT])
    try:
        process.wait_listening()
        upstream.start()
        process.wait_ready()
        assert run("ready", env={"EDGE_URL": f"http://127.0.0.1:{process.port}"}).returncode == 0
    finally:
        process.stop()
        upstream.stop()


def test_probe_of_nothing_fails() -> None:
    answer = run("health", "--edge-url", f"http://127.0.0.1:{free_port()}")
    assert answer.returncode == 1 and "cannot be reached" in answer.stderr
    assert run("ready", "--edge-url", "nope").returncode == 2


def test_one_line_says_the_edge_is_ready_at_the_default_log_level(
    upstream_server: ServerProcess, tmp_path: Path
) -> None:
    # It printed nothing on a successful start: now one line, where it listens, from what, how many flags.
    process = edge(upstream_server.url, [DEV_CLIENT])
    try:
        process.wait_ready()
        seen = process.read_until("is ready at")
    finally:
        stdout, _ = process.stop()
    lines = [line for line in (seen + stdout).splitlines() if line.startswith("INFO")]
    assert lines == [
        f"INFO: flagproxy edge is ready at http://127.0.0.1:{process.port}: 3 flags in 1 environment and "
        f"project set(s) from upstream {upstream_server.url}"
    ], seen + stdout
    bootstrap = tmp_path / "features.json"
    bootstrap.write_text('{"version": 2, "features": [{"name": "a", "enabled": true, "strategies": []}]}')
    process = EdgeProcess(["offline", "--bootstrap-file", str(bootstrap), "--tokens", DEV_CLIENT])
    try:
        process.wait_ready()
        seen = process.read_until("is ready at")
    finally:
        stdout, _ = process.stop()
    assert (
        f"INFO: flagproxy edge is ready at http://127.0.0.1:{process.port}: 1 flags in 1 environment "
        f"and project set(s) from the file {bootstrap}" in seen + stdout
    )


def test_probe_help_says_what_each_probe_asks() -> None:
    # It said "Exit 0 when a running edge is health".
    health, ready = run("health", "--help").stdout, run("ready", "--help").stdout
    assert "/internal-backstage/health" in health and "is health" not in health
    assert "/internal-backstage/ready" in ready and "start-up token" in ready


def test_docs_list_every_option_and_route() -> None:
    from pathlib import Path

    from flagproxy.edge.routes import create_app
    from flagproxy.edge.settings import EdgeSettings

    docs = (Path(__file__).resolve().parents[2] / "docs" / "edge.md").read_text()
    for option in OPTIONS:
        assert f"| `{option.flag}`" in docs and f"`{option.env}`" in docs, option.key
    app = create_app(EdgeSettings.load({"upstream_url": "http://x", "dynamic": "true"}, env={}))
    paths = {"/" + route.path for route in app.router.routes}
    for path in paths:
        documented = path.replace("<name:str>", ":name").replace("<name>", ":name")
        assert f"{documented}`" in docs, path


def test_list_options_may_be_repeated(upstream_server: ServerProcess) -> None:
    import orjson

    from tests.edge.conftest import PROD_CLIENT
    from tests.edge.harness import EdgeProcess

    process = EdgeProcess(["-u", upstream_server.url, "-t", DEV_CLIENT, "-t", PROD_CLIENT])
    try:
        process.wait_ready()
        refreshes = orjson.loads(process.get("/internal-backstage/tokens")[2])["tokenRefreshes"]
        assert sorted(r["environment"] for r in refreshes) == ["development", "production"]
    finally:
        process.stop()
