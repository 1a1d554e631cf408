"""`flagproxy proxy` as a real process: help, start-up errors, env configuration, workers, JSON logs."""

from __future__ import annotations

import glob
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flagproxy.proxy.settings import OPTIONS
from flagproxy.sync.backup import UpstreamBackup
from tests.etags import assert_node_body
from tests.http.loopback import KEY, fetch, free_port
from tests.http.processes import sockets_by_process, wait_until_listening

pytestmark = pytest.mark.slow


def run_cli(args: list[str], env: dict[str, str], timeout: float = 20) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flagproxy", "proxy", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_help_lists_every_option_with_its_default(base_env):
    result = run_cli(["--help"], {**base_env, "COLUMNS": "10000"})  # wide: argparse breaks no words
    assert result.returncode == 0
    entries = result.stdout.split("\n  --")
    for option in OPTIONS:
        if option.env:
            flag = option.key.replace("_", "-")
            (entry,) = [e for e in entries if e.startswith(f"{flag} ")]
        else:  # keyword-only objects: listed after the flags
            (entry,) = [line for line in result.stdout.splitlines() if line.strip().startswith(option.key)]
        assert f"default: {option.default_text()}]" in entry, entry
        for name in (*option.env, *option.aliases):
            assert name in entry, name
    assert "--workers" in result.stdout


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
        ({"UNLEASH_FETCH_INTERVAL": "30s"}, "UNLEASH_FETCH_INTERVAL: '30s' is not a whole number"),
        ({"CORS_MAX_AGE": "-1"}, "CORS_MAX_AGE: '-1' is not a whole number"),
        ({"CORS_CREDENTIALS": "sometimes"}, "CORS_CREDENTIALS: 'sometimes' is not a boolean"),
        ({"HTTPS_PROXY": "socks5://p:1080"}, "HTTPS_PROXY: 'socks5://p:1080' is not an http:// or https://"),
        ({"EXP_BOOTSTRAP_URL": "boot.json"}, "EXP_BOOTSTRAP_URL: 'boot.json' is not an http(s) URL"),
        ({"PROXY_PORT": "0"}, "flagproxy proxy: PROXY_PORT: must be between 1 and 65535"),
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


COMPLETE = {"SERVICE_URL": "http://x/api", "SERVICE_API_TOKEN": "t", "SERVICE_PROXY_CLIENT_KEYS": "k"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workers", "0"], "argument --workers: '0' is not a whole number of at least 1"),
        (["--workers", "two"], "argument --workers: 'two' is not a whole number of at least 1"),
        (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
        # Named as written: the flag, not the variable or the keyword
        (["--port", "http"], "flagproxy proxy: --port: 'http' is not a whole number"),
        (["--port", "0"], "flagproxy proxy: --port: must be between 1 and 65535"),
        (["--refresh-interval", "0"], "flagproxy proxy: --refresh-interval: must be at least 1"),
        (
            ["--service-url", "ftp://x"],
            "flagproxy proxy: --service-url: 'ftp://x' is not an http:// or https://",
        ),
        (
            ["--host", "no.such.host.invalid"],
            "flagproxy proxy: --host: cannot listen on 'no.such.host.invalid'",
        ),
    ],
)
def test_bad_flags_are_one_line_and_exit_2(base_env, args, message):
    result = run_cli(args, {**base_env, **COMPLETE})
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr and "usage:" not in result.stderr


@pytest.mark.parametrize("command", [["proxy"], ["edge"], ["edge", "offline"]], ids=" ".join)
def test_help_lists_the_options_in_groups(command):
    # One flat list of 44 options was hard to read: each option sits under its table entry's group, the
    # groups in one order for both commands.
    from flagproxy.edge.settings import OPTIONS as EDGE_OPTIONS
    from flagproxy.http.command_line import OPTION_GROUPS

    text = subprocess.run(
        [sys.executable, "-m", "flagproxy", *command, "--help"], capture_output=True, text=True, timeout=30,
        env={**os.environ, "COLUMNS": "200"},
    ).stdout  # fmt: skip
    titles = [title for title in OPTION_GROUPS.values() if f"\n{title}:\n" in text]
    assert [text.index(f"\n{t}:\n") for t in titles] == sorted(text.index(f"\n{t}:\n") for t in titles)
    sections = {title: text.split(f"\n{title}:\n", 1)[1].split("\n\n", 1)[0] for title in titles}
    table = OPTIONS if command == ["proxy"] else EDGE_OPTIONS
    mode = command[-1] if command[-1] == "offline" else "edge"
    listed = [o for o in table if (o.env if command == ["proxy"] else mode in o.modes)]
    assert listed
    for option in listed:
        flag = "--" + option.key.replace("_", "-")
        assert option.group in OPTION_GROUPS, option.key
        assert f"  {flag}" in sections[OPTION_GROUPS[option.group]], (option.key, option.group)
    if command == ["proxy"]:
        assert "  --workers N" in sections[OPTION_GROUPS["workers"]]
    # The usage line is one line: "[options]", not every option spelled out again before the groups (which
    # is what argparse does unless told otherwise). The groups' length is the options' own.
    assert text.splitlines()[0] == f"usage: flagproxy {' '.join(command)} [options]"
    assert text.splitlines()[1] == ""


def test_a_port_in_use_is_one_line_and_exit_2(base_env):
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli([], {**base_env, **COMPLETE, "PORT": str(port)})
    assert result.returncode == 2
    assert (
        result.stderr == f"flagproxy proxy: PORT: cannot listen on 0.0.0.0:{port}: Address already in use\n"
    )
    with socket.socket() as taken:  # given as a flag, named as the flag
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli(["--port", str(port)], {**base_env, **COMPLETE})
    assert result.returncode == 2
    assert result.stderr.startswith(f"flagproxy proxy: --port: cannot listen on 0.0.0.0:{port}: ")


def test_an_instance_folder_of_another_user_is_one_line_and_exit_2(base_env, tmp_path):
    # Workers load what the instance folder holds (compiled images are unpickled), and $TMPDIR is shared.
    port = free_port()
    folder = tmp_path / f"flagproxy-instance-service-proxy-{port}"
    folder.mkdir()
    os.chown(folder, 4242, 4242)  # the tests run as root: any other user will do
    result = run_cli([], {**base_env, **COMPLETE, "PORT": str(port)})
    assert result.returncode == 2
    assert result.stderr.startswith(f"flagproxy proxy: the instance folder {folder} is owned by user 4242")
    assert result.stderr.count("\n") == 1


def test_the_readme_command_serves_correct_toggles(launch, upstream):
    # Exactly `SERVICE_URL=... SERVICE_API_TOKEN=... SERVICE_PROXY_CLIENT_KEYS=... PORT=... flagproxy proxy`:
    # the installed console script, configured by those four variables and nothing else.
    script = shutil.which("flagproxy", path=os.path.dirname(sys.executable))
    assert script, "the flagproxy console script is not installed beside this Python"
    port = free_port()
    process = launch(
        {
            "SERVICE_URL": upstream.url,
            "SERVICE_API_TOKEN": "stub-server-token",
            "SERVICE_PROXY_CLIENT_KEYS": KEY,
            "PORT": str(port),
        },
        command=[script, "proxy"],
    )
    process.wait_ready()
    auth = {"Authorization": KEY}
    status, headers, body = fetch(port, "GET", "/proxy?userId=u1&sessionId=s1", auth)
    assert status == 200
    assert_node_body(headers, body, 'W/"876-gEN+QlEcLKfCqM0uTN6Nv+KrNKI"')  # the Node proxy's bytes
    assert set(headers) == {  # the Node proxy's headers (and no test-only artefact such as alt-svc)
        "access-control-allow-origin",
        "access-control-expose-headers",
        "cache-control",
        "vary",
        "keep-alive",
        "content-type",
        "etag",
        "content-length",
        "connection",
    } | ({"date"} & set(headers))
    eu = json.loads(fetch(port, "GET", "/proxy?sessionId=s1&properties[region]=eu", auth)[2])["toggles"]
    assert {"segment-eu", "c-in-region"} <= {t["name"] for t in eu}
    asked = json.dumps({"toggles": ["segment-eu", "nope"], "context": {"properties": {"region": "us"}}})
    status, _, body = fetch(port, "POST", "/proxy", {**auth, "Content-Type": "application/json"}, asked)
    assert [(t["name"], t["enabled"]) for t in json.loads(body)["toggles"]] == [
        ("segment-eu", False),
        ("nope", False),
    ]
    assert fetch(port, "GET", "/proxy", {"Authorization": "wrong"})[0] == 401
    poll = upstream.received("/api/client/features")[0]
    assert poll["headers"]["Authorization"] == "stub-server-token"
    assert poll["headers"]["unleash-appname"] == "service-proxy"  # SPEC.md's default app name
    assert upstream.wait_for("/api/client/register")[0]["body"]["interval"] == 30000  # SPEC.md's default
    stdout, stderr = process.stop()
    assert process.popen.returncode == 0, stderr
    # The default log level is warn, and still one line says the proxy is ready, where and with what.
    port_text = f"http://0.0.0.0:{port}/proxy"
    assert [line for line in stdout.splitlines() if line.startswith("INFO")] == [
        f"INFO: flagproxy proxy is ready to receive traffic at {port_text}: 29 flags from the upstream "
        f"(upstream {upstream.url})"
    ], stdout


def _backed_up(launch, upstream, token: str):
    """A proxy that read `upstream` once and stopped, leaving its default backup; its environment."""
    env = {
        "SERVICE_URL": upstream.url,
        "SERVICE_API_TOKEN": token,
        "SERVICE_PROXY_CLIENT_KEYS": KEY,
        "SERVICE_METRICS_INTERVAL": "0",
    }
    first = launch(env)
    first.wait_ready()
    return env, first


def test_a_restart_is_ready_from_the_default_backup_file_while_the_upstream_is_down(
    launch, upstream, base_env
):
    env, first = _backed_up(launch, upstream, "stub-server-token")
    expected = fetch(first.port, "GET", "/proxy?userId=u1&sessionId=s1", {"Authorization": KEY})[1]["etag"]
    first.stop()
    assert len(glob.glob(os.path.join(base_env["TMPDIR"], "flagproxy-backup-service-proxy-*.json"))) == 1
    upstream.features_status = 503
    polls_before = len(upstream.received("/api/client/features"))
    second = launch(env)
    second.wait_ready()
    upstream.wait_for("/api/client/features", polls_before + 1)  # it asked, and the upstream said 503
    status, headers, _ = fetch(second.port, "GET", "/proxy?userId=u1&sessionId=s1", {"Authorization": KEY})
    assert (status, headers["etag"]) == (200, expected)


def test_a_backup_of_another_upstream_is_never_served_and_a_404_says_why(launch, upstream, base_env):
    env, first = _backed_up(launch, upstream, "default:development.stub-secret")
    first.stop()
    [backup] = glob.glob(os.path.join(base_env["TMPDIR"], "flagproxy-backup-service-proxy-*.json"))
    text = Path(backup).read_text()
    record = json.loads(text)
    assert (record["upstream"], record["token"]) == (upstream.url, "default:development.****")
    assert "stub-secret" not in text  # the token's secret is never written
    # Another proxy with the same app name in the same folder, its SERVICE_URL without /api: the upstream
    # answers 404 and the proxy says what is probably wrong, serves nothing, and never the first one's flags.
    lacking = launch({**env, "SERVICE_URL": upstream.url.removesuffix("/api")})
    seen = lacking.read_until("http://unleash:4242/api.")
    assert "client/features answered 404; keeping the last good flags" in seen, seen
    assert "The URL probably lacks /api: SERVICE_URL is the upstream's API address, e.g. " in seen, seen
    assert fetch(lacking.port, "GET", "/proxy", {"Authorization": KEY})[0] == 503
    lacking.stop()
    doubled = launch({**env, "SERVICE_URL": upstream.url + "/api"})
    seen = doubled.read_until("http://unleash:4242/api.")
    assert "The URL probably doubles /api" in seen, seen
    doubled.stop()
    # The first proxy's file copied where a proxy of another upstream looks: recognised and not read.
    other_url = f"http://127.0.0.1:{free_port()}/api"  # nothing answers there
    other = UpstreamBackup(other_url, env["SERVICE_API_TOKEN"], base_env["TMPDIR"]).path("service-proxy")
    shutil.copy(backup, other)
    stray = launch({**env, "SERVICE_URL": other_url})
    seen = stray.read_until(f"was written for {upstream.url}; not read")
    assert fetch(stray.port, "GET", "/proxy", {"Authorization": KEY})[0] == 503, seen


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
    path = "/proxy?userId=u1&sessionId=s1"
    status, headers, body = fetch(process.port, "GET", path, {"Authorization": KEY})
    assert status == 200
    assert_node_body(headers, body, 'W/"876-gEN+QlEcLKfCqM0uTN6Nv+KrNKI"')
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
    for _ in range(10):
        assert fetch(process.port, "GET", "/proxy", {"Authorization": KEY})[0] == 200
    stdout, _ = process.stop()
    records = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    ready = [r for r in records if "ready to receive traffic" in r["message"]]
    assert len(ready) == 1  # one sync for the instance, whatever the number of workers
    assert all(set(r) == {"level", "message", "args"} for r in records)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_while_workers_start_stops_the_proxy_cleanly(launch, upstream, signum):
    # Sanic's manager alone would wait 30 s for startup acknowledgements that never come, then kill its
    # workers (flagproxy/http/serving.py); `docker stop` right after a start must not take that long.
    process = launch(
        {
            "SERVICE_URL": upstream.url,
            "SERVICE_API_TOKEN": "stub-server-token",
            "SERVICE_PROXY_CLIENT_KEYS": KEY,
            "SERVICE_METRICS_INTERVAL": "0",
            "LOG_LEVEL": "info",
        },
        ["--workers", "2"],
    )
    seen = process.read_until("is listening on")  # logged just before the workers are spawned
    time.sleep(0.3)  # the workers are importing the app; none has acknowledged its startup yet
    assert "ready to receive traffic" not in seen
    _, stderr = process.stop(signum)
    assert stderr != "did not stop in time"
    assert process.popen.returncode == 0, seen + stderr


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


def test_a_process_configured_by_environment_alone_honours_every_kind_of_option(launch, upstream, tmp_path):
    enrichers = tmp_path / "enrichers.py"
    enrichers.write_text(
        "def eu(ctx):\n    ctx['properties']['region'] = 'eu'\n    return ctx\nenrichers = [eu]\n"
    )
    strategies = tmp_path / "strategies.py"
    strategies.write_text(
        "from flagproxy.strategies import Strategy\n"
        "class Yes(Strategy):\n"
        "    name = 'myCustomStrategy'\n"
        "    def is_enabled(self, parameters, context):\n"
        "        return True\n"
        "strategies = [Yes()]\n"
    )
    process = launch(
        {
            # The Node proxy's names work as aliases; only the HTTP proxy (the stub) can reach flags.invalid.
            "UNLEASH_URL": "http://flags.invalid:4242/api",
            "HTTP_PROXY": upstream.url.removesuffix("/api"),
            "UNLEASH_API_TOKEN": "stub-server-token",
            "SERVICE_PROXY_CLIENT_KEYS": "k1, k2",
            "CLIENT_KEY_HEADER_NAME": "X-Client-Key",
            "PROXY_BASE_PATH": "edge/",
            "SERVICE_APP_NAME": "my-app",
            "SERVICE_INSTANCE_ID": "instance-7",
            "SERVICE_FETCH_INTERVAL": "100",
            "SERVICE_METRICS_INTERVAL": "150",
            "SERVICE_ENVIRONMENT": "production",
            "SERVICE_PROJECT_NAME": "proj",
            "SERVICE_NAME_PREFIX": "c-",
            "SERVICE_TAGS": "simple:proxy",
            "ENABLE_ALL_ENDPOINT": "true",
            "ENABLE_OAS": "true",
            "TRUST_PROXY": "127.0.0.1",
            "CORS_ORIGIN": "https://a.example",
            "EXP_SERVER_SIDE_SDK_CONFIG_TOKENS": "server-token",
            "EXP_CUSTOM_ENRICHERS_FILE": str(enrichers),
            "SERVICE_CUSTOM_STRATEGIES_FILE": str(strategies),
            "JSON_LOGGER": "true",
            "LOG_LEVEL": "info",
        }
    )
    process.wait_ready(health="/edge/proxy/health")
    key = {"X-Client-Key": "k2", "X-Forwarded-For": "10.1.2.3", "Origin": "https://a.example"}
    status, headers, body = fetch(process.port, "GET", "/edge/proxy/all?sessionId=s&environment=dev", key)
    assert status == 200 and headers["access-control-allow-origin"] == "https://a.example"
    enabled = {t["name"] for t in json.loads(body)["toggles"] if t["enabled"]}
    assert "c-app-env" in enabled  # appName my-app and the forced environment production
    assert "segment-eu" in enabled  # the enricher's region
    assert "unknown-strategy" in enabled  # the custom strategy
    assert "remote-address" in enabled  # X-Forwarded-For from a trusted hop
    assert fetch(process.port, "GET", "/edge/proxy", {"Authorization": "k1"})[0] == 401  # the other header
    assert (
        fetch(process.port, "GET", "/edge/proxy/client/features", {"X-Client-Key": "server-token"})[0] == 200
    )
    assert fetch(process.port, "GET", "/edge/docs/openapi.json")[0] == 200
    poll = upstream.received("/api/client/features")[0]
    assert poll["query"] == "project=proj&namePrefix=c-&tag=simple%3Aproxy"
    assert (poll["headers"]["unleash-appname"], poll["headers"]["UNLEASH-INSTANCEID"]) == (
        "my-app",
        "instance-7",
    )
    register = upstream.wait_for("/api/client/register")[0]["body"]
    assert register["interval"] == 150 and "myCustomStrategy" in register["strategies"]
    stdout, _ = process.stop()
    records = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    assert any("ready to receive traffic" in r["message"] for r in records)  # JSON lines at info


def test_each_worker_listens_on_its_own_socket_and_connections_spread_over_them(launch, upstream):
    # Sanic's one shared socket let one worker take most of a burst of keep-alive connections (38 of 50);
    # flagproxy/http/serving.py gives each worker its own SO_REUSEPORT socket, so the kernel spreads them.
    process = launch(
        {
            "SERVICE_URL": upstream.url,
            "SERVICE_API_TOKEN": "stub-server-token",
            "SERVICE_PROXY_CLIENT_KEYS": KEY,
            "SERVICE_METRICS_INTERVAL": "0",
        },
        ["--workers", "2"],
    )
    process.wait_ready()
    wait_until_listening(process, 2)
    listening = sockets_by_process(process.port, process.popen.pid)["listen"]
    assert len(listening) == 2 and set(listening.values()) == {1}, listening
    assert process.popen.pid not in listening  # the main process keeps the address bound, not listening
    connections = [http.client.HTTPConnection("127.0.0.1", process.port, timeout=10) for _ in range(40)]
    try:
        for connection in connections:
            connection.request("GET", "/proxy", headers={"Authorization": KEY})
            assert connection.getresponse().status == 200
        established = sockets_by_process(process.port, process.popen.pid)["established"]
        assert set(established) == set(listening), (established, listening)
        assert sum(established.values()) == 40
        assert min(established.values()) >= 5, established  # even by hashing: below 5 of 40 is ~1e-7
    finally:
        for connection in connections:
            connection.close()
        process.stop()
