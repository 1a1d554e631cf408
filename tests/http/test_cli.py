"""`flagproxy proxy` as a real process: help, start-up errors, env configuration, workers, JSON logs."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from flagproxy.proxy.settings import OPTIONS
from tests.http.loopback import KEY, fetch, free_port

pytestmark = pytest.mark.slow


def run_cli(args: list[str], env: dict[str, str], timeout: float = 20) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flagproxy", "proxy", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def base_env(tmp_path: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "PYTHONPATH", "VIRTUAL_ENV")}
    return {**keep, "TMPDIR": str(tmp_path)}


def test_help_lists_every_option_with_its_default(base_env):
    result = run_cli(["--help"], base_env)
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    for option in OPTIONS:
        for name in (*option.env, *option.aliases):
            assert name in text, name
    assert "default: 5000" in text and "default: service-proxy" in text and "--workers" in text


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "serviceUrl option (SERVICE_URL)"),
        ({"SERVICE_URL": "http://x/api"}, "serviceApiToken option (SERVICE_API_TOKEN)"),
        (
            {"SERVICE_URL": "http://x/api", "SERVICE_API_TOKEN": "t"},
            "clientKeys option (SERVICE_PROXY_CLIENT_KEYS)",
        ),
        (
            {"SERVICE_URL": "http://x/api", "SERVICE_API_TOKEN": "t", "SERVICE_PROXY_CLIENT_KEYS": " , "},
            "clientKeys option (SERVICE_PROXY_CLIENT_KEYS)",
        ),
        ({"SERVICE_FETCH_INTERVAL": "abc"}, "SERVICE_FETCH_INTERVAL: 'abc' is not a whole number"),
        ({"SERVICE_FETCH_INTERVAL": "0"}, "SERVICE_FETCH_INTERVAL: must be at least 1"),
        ({"ENABLE_ALL_ENDPOINT": "maybe"}, "ENABLE_ALL_ENDPOINT: 'maybe' is not a boolean"),
        ({"LOG_LEVEL": "loud"}, "LOG_LEVEL: 'loud' is not one of debug, info, warn, error, fatal"),
        ({"TRUST_PROXY": "not-an-ip"}, "TRUST_PROXY: 'not-an-ip' is not true, false, an IP address"),
        ({"SERVICE_TAGS": "simple"}, "SERVICE_TAGS: 'simple' is not tagName:tagValue"),
        ({"PORT": "70000"}, "PORT: must be between 1 and 65535"),
        ({"SERVICE_URL": "ftp://x"}, "SERVICE_URL: 'ftp://x' is not an http:// or https:// URL"),
        (
            {"SERVICE_CUSTOM_STRATEGIES_FILE": "/nope/s.py"},
            "SERVICE_CUSTOM_STRATEGIES_FILE: /nope/s.py: no such file",
        ),
        ({"EXP_CUSTOM_ENRICHERS_FILE": "/nope/e.py"}, "EXP_CUSTOM_ENRICHERS_FILE: /nope/e.py: no such file"),
    ],
)
def test_bad_configuration_is_one_line_and_exit_2(base_env, env, message):
    # The first four cases are about required options, so they start from nothing; the rest start
    # from a complete configuration and break one value.
    required_case = message.startswith(("serviceUrl", "serviceApiToken", "clientKeys"))
    complete = {"SERVICE_URL": "http://x/api", "SERVICE_API_TOKEN": "t", "SERVICE_PROXY_CLIENT_KEYS": "k"}
    result = run_cli([], {**base_env, **({} if required_case else complete), **env})
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert message in lines[0]
    assert "Traceback" not in result.stderr


class Process:
    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.port = free_port()
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "flagproxy", "proxy", *args],
            env={**env, "PORT": str(self.port), "PROXY_HOST": "127.0.0.1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group, so workers can be cleaned up with it
        )

    def wait_ready(self, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.popen.poll() is None, self.popen.communicate()
            try:
                if fetch(self.port, "GET", "/proxy/health", timeout=1)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError("the proxy process never became ready")

    def stop(self) -> tuple[str, str]:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGINT)
        try:
            return self.popen.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            return "", "did not stop in time"
        finally:
            # Whatever is left of the group (a worker that outlived the main process) goes too.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            if self.popen.poll() is None:
                self.popen.wait(5)


@pytest.fixture
def launch(base_env) -> Iterator:
    started: list[Process] = []

    def start(env: dict[str, str], args: list[str] | None = None) -> Process:
        process = Process(args or [], {**base_env, **env})
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


def test_quick_start_serves_toggles(launch, upstream):
    process = launch(
        {
            "SERVICE_URL": upstream.url,
            "SERVICE_API_TOKEN": "stub-server-token",
            "SERVICE_PROXY_CLIENT_KEYS": KEY,
            "SERVICE_METRICS_INTERVAL": "0",
        }
    )
    process.wait_ready()
    status, headers, _ = fetch(process.port, "GET", "/proxy?userId=u1&sessionId=s1", {"Authorization": KEY})
    assert (status, headers["etag"]) == (200, 'W/"876-gEN+QlEcLKfCqM0uTN6Nv+KrNKI"')
    _, stderr = process.stop()
    assert process.popen.returncode == 0, stderr


def test_unleash_aliases_work_and_the_spec_name_wins_with_a_warning(launch, upstream):
    process = launch(
        {
            "SERVICE_URL": upstream.url,
            "UNLEASH_URL": "http://127.0.0.1:9/api",
            "UNLEASH_API_TOKEN": "stub-server-token",
            "UNLEASH_PROXY_CLIENT_KEYS": KEY,
            "UNLEASH_APP_NAME": "aliased",
            "SERVICE_METRICS_INTERVAL": "0",
        }
    )
    process.wait_ready()
    assert fetch(process.port, "GET", "/proxy", {"Authorization": KEY})[0] == 200
    assert upstream.received("/api/client/features")[0]["headers"]["unleash-appname"] == "aliased"
    stdout, _ = process.stop()
    warnings = [line for line in stdout.splitlines() if "both SERVICE_URL and UNLEASH_URL" in line]
    assert len(warnings) == 1


def test_workers_and_json_logs(launch, upstream):
    process = launch(
        {
            "SERVICE_URL": upstream.url,
            "SERVICE_API_TOKEN": "stub-server-token",
            "SERVICE_PROXY_CLIENT_KEYS": KEY,
            "SERVICE_METRICS_INTERVAL": "0",
            "JSON_LOGGER": "true",
            "LOG_LEVEL": "info",
        },
        ["--workers", "2"],
    )
    process.wait_ready()
    # Both workers have started once each has polled; Sanic does not take a signal well while a worker
    # is still starting up.
    upstream.wait_for("/api/client/features", 2, timeout=20)
    time.sleep(0.5)
    for _ in range(10):
        assert fetch(process.port, "GET", "/proxy", {"Authorization": KEY})[0] == 200
    stdout, _ = process.stop()
    records = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    ready = [r for r in records if "ready to receive traffic" in r["message"]]
    assert len(ready) == 2  # one poller per worker
    assert all(set(r) == {"level", "message", "args"} for r in records)


def test_flags_win_over_env(launch, upstream):
    process = launch(
        {
            "SERVICE_URL": "http://127.0.0.1:9/api",
            "SERVICE_API_TOKEN": "stub-server-token",
            "SERVICE_PROXY_CLIENT_KEYS": "env-key",
        },
        [
            "--service-url",
            upstream.url,
            "--client-keys",
            "flag-key",
            "--enable-all-endpoint",
            "--metrics-interval",
            "0",
        ],
    )
    process.wait_ready()
    assert fetch(process.port, "GET", "/proxy/all", {"Authorization": "flag-key"})[0] == 200
