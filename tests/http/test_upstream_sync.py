"""What the upstream receives and how the proxy copes with it: polls, filters, register, metrics,
failures and backoff, backup, bootstrap, HTTP proxies."""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import time

import pytest

from tests.etags import assert_node_body
from tests.http.loopback import KEY, SAMPLE, ConnectProxy, StubUpstream


def wait_until(check, timeout: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.02)


def test_polls_carry_filters_and_headers_and_use_the_etag(proxy_factory, upstream):
    proxy_factory(
        service_app_name="my-proxy",
        project_name="proj-a",
        name_prefix="c-",
        tags="simple:proxy, demo:test",
        refresh_interval=50,
    )
    first, second = upstream.wait_for("/api/client/features", 2)[:2]
    assert first["query"] == "project=proj-a&namePrefix=c-&tag=simple%3Aproxy&tag=demo%3Atest"
    headers = first["headers"]
    assert headers["Authorization"] == "stub-server-token"
    assert headers["User-Agent"] == "my-proxy"
    assert headers["unleash-appname"] == "my-proxy"
    assert headers["UNLEASH-INSTANCEID"] == "test-instance"
    assert headers["unleash-interval"] == "50"
    assert headers["Unleash-Client-Spec"] == "5.2.0"
    assert headers["unleash-sdk"].startswith("flagproxy:")
    assert headers["unleash-connection-id"] == second["headers"]["unleash-connection-id"]
    assert "If-None-Match" not in headers
    assert second["headers"]["If-None-Match"] == upstream.etag()


def test_register_once_and_metrics_in_the_unleash_format(proxy_factory, upstream):
    proxy = proxy_factory(metrics_interval=200, service_app_name="my-proxy")
    register = upstream.wait_for("/api/client/register")[0]
    body = register["body"]
    assert body["appName"] == "my-proxy" and body["instanceId"] == "test-instance"
    assert body["interval"] == 200
    assert "flexibleRollout" in body["strategies"]
    assert register["headers"]["Content-Type"] == "application/json"
    proxy.post(
        "/proxy", {"toggles": ["default-on", "disabled-feature", "does-not-exist", "default-on"]}, key=KEY
    )
    proxy.get("/proxy?userId=u1", key=KEY)  # list evaluations are not counted
    proxy.post(
        "/proxy/client/metrics",
        {
            "appName": "web",
            "instanceId": "browser-1",
            "bucket": {
                "start": "2024-01-01T00:00:00.000Z",
                "stop": "2024-01-01T00:01:00.000Z",
                "toggles": {
                    "default-on": {"yes": 2, "no": 1, "variants": {"disabled": 3}},
                    "frontend-only": {"no": 4},
                },
            },
        },
        key=KEY,
    )
    metrics = upstream.wait_for("/api/client/metrics")[0]
    payload = metrics["body"]
    assert payload["appName"] == "my-proxy" and payload["instanceId"] == "test-instance"
    assert payload["bucket"]["toggles"] == {
        "default-on": {"yes": 4, "no": 1, "variants": {"disabled": 3}},
        "disabled-feature": {"yes": 0, "no": 1, "variants": {}},
        "does-not-exist": {"yes": 0, "no": 1, "variants": {}},
        "frontend-only": {"yes": 0, "no": 4, "variants": {}},
    }
    assert payload["bucket"]["start"] <= payload["bucket"]["stop"]
    assert metrics["headers"]["unleash-interval"] == "200"
    time.sleep(0.6)  # several more intervals with nothing counted: nothing is sent
    assert len(upstream.received("/api/client/metrics")) == 1
    assert len(upstream.received("/api/client/register")) == 1


def test_metrics_are_kept_and_resent_when_the_upstream_fails(proxy_factory, upstream):
    upstream.post_status = 503
    proxy = proxy_factory(metrics_interval=100, metrics_jitter=40)
    proxy.post("/proxy", {"toggles": ["default-on"]}, key=KEY)
    upstream.wait_for("/api/client/metrics", 2)
    proxy.post("/proxy", {"toggles": ["default-on"]}, key=KEY)
    upstream.post_status = 202

    def accepted_yes() -> int:
        posts = [p for p in upstream.received("/api/client/metrics") if p["status"] == 202]
        return sum(p["body"]["bucket"]["toggles"].get("default-on", {}).get("yes", 0) for p in posts)

    # Both counts arrive once accepted: the one refused twice, kept and sent again, and the later one.
    wait_until(lambda: accepted_yes() == 2)
    time.sleep(0.3)
    assert accepted_yes() == 2


def test_metrics_are_flushed_at_shutdown(proxy_factory, upstream):
    proxy = proxy_factory(metrics_interval=60_000)
    proxy.post("/proxy", {"toggles": ["default-on"]}, key=KEY)
    proxy.stop()
    sent = upstream.received("/api/client/metrics")
    assert sent and sent[-1]["body"]["bucket"]["toggles"]["default-on"]["yes"] == 1


def test_no_register_or_metrics_with_interval_zero(proxy_factory, upstream):
    proxy = proxy_factory(metrics_interval=0)
    proxy.post("/proxy", {"toggles": ["default-on"]}, key=KEY)
    time.sleep(0.3)
    proxy.stop()
    assert upstream.received("/api/client/register") == []
    assert upstream.received("/api/client/metrics") == []


def test_upstream_failures_keep_the_last_snapshot_and_back_off(proxy_factory, upstream):
    proxy = proxy_factory(refresh_interval=50)
    before = proxy.get("/proxy?userId=u1&sessionId=s1", key=KEY)
    upstream.features_status = 500
    proxy.read_until("answered 500")  # its warning, from the process's output
    upstream.wait_for("/api/client/features", len(upstream.received("/api/client/features")) + 3)
    assert proxy.get("/proxy?userId=u1&sessionId=s1", key=KEY)[1]["etag"] == before[1]["etag"]
    assert proxy.get("/proxy/health")[0] == 200
    polls = [r["time"] for r in upstream.received("/api/client/features")][-3:]
    assert polls[2] - polls[1] > polls[1] - polls[0] > 0.05  # the gaps grow
    upstream.features_status = 401
    proxy.read_until("not allowed to read features")
    assert proxy.get("/proxy/health")[0] == 200


@pytest.mark.parametrize("status", [429, 503, 404])
def test_rate_limits_and_server_errors_back_off_and_keep_serving(proxy_factory, upstream, status):
    proxy = proxy_factory(refresh_interval=50)
    before = proxy.get("/proxy?userId=u1&sessionId=s1", key=KEY)[1]["etag"]
    upstream.features_status = status
    proxy.read_until(f"answered {status}")
    upstream.wait_for("/api/client/features", len(upstream.received("/api/client/features")) + 3)
    polls = [r["time"] for r in upstream.received("/api/client/features")][-3:]
    assert polls[2] - polls[1] > polls[1] - polls[0] >= 0.1  # 50 ms x (1 + failures), growing
    assert proxy.get("/proxy?userId=u1&sessionId=s1", key=KEY)[1]["etag"] == before
    upstream.features_status = 200
    upstream.payload = {"version": 2, "features": [{"name": "back", "enabled": True, "strategies": []}]}
    wait_until(lambda: [t["name"] for t in proxy.toggles("/proxy?userId=u1")] == ["back"])


def test_timeouts_back_off_too(proxy_factory, upstream):
    proxy = proxy_factory(refresh_interval=50, upstream_timeout=100)
    upstream.delay = 0.5
    proxy.read_until("timed out")
    upstream.delay = 0
    assert proxy.get("/proxy", key=KEY)[0] == 200


def test_a_new_payload_replaces_the_flags(proxy_factory, upstream):
    proxy = proxy_factory(refresh_interval=50)
    upstream.payload = {"version": 2, "features": [{"name": "only-one", "enabled": True, "strategies": []}]}
    wait_until(lambda: [t["name"] for t in proxy.toggles("/proxy?userId=u1&sessionId=s1")] == ["only-one"])
    status, headers, body = proxy.get("/proxy?userId=u1&sessionId=s1", key=KEY)
    assert status == 200
    assert_node_body(headers, body, 'W/"8b-fMH/LX66Y9J/iXKJCISfAUdfbv4"')  # the Node proxy's answer


def test_an_invalid_payload_is_ignored(proxy_factory, upstream):
    proxy = proxy_factory(refresh_interval=50, enable_all_endpoint=True)
    before = proxy.toggles("/proxy/all?userId=u1&sessionId=s1")
    upstream.payload = {"version": 2, "nothing": []}
    proxy.read_until("is not a client features document")  # the refusal, logged
    assert proxy.toggles("/proxy/all?userId=u1&sessionId=s1") == before and len(before) == 29


def test_a_restart_is_ready_from_the_backup_while_the_upstream_is_down(proxy_factory, upstream, tmp_path):
    first = proxy_factory()  # its backup file goes in TMPDIR, the test's folder
    expected = first.get("/proxy?userId=u1&sessionId=s1", key=KEY)[1]["etag"]
    first.stop()
    # One file, of this upstream and token (flagproxy/sync/backup.py UpstreamBackup)
    assert len(list(tmp_path.glob("flagproxy-backup-service-proxy-*.json"))) == 1
    upstream.features_status = 503
    second = proxy_factory()  # ready (health 200) though every poll is refused (503): from the backup
    assert second.get("/proxy?userId=u1&sessionId=s1", key=KEY)[1]["etag"] == expected


def test_a_custom_storage_provider(embedded, upstream, tmp_path):
    # A keyword-only option (an object): a program that embeds the proxy hands it one that writes each
    # payload it is given to a file (tests/http/embedded.py FileStorage).
    saved = tmp_path / "saved.json"
    embedded(storage=str(saved), service_app_name="app/x")
    wait_until(saved.exists)
    record = json.loads(saved.read_text())
    assert record["key"] == "app/x" and record["payload"]["features"] == SAMPLE["features"]


def test_bootstrap_makes_the_proxy_ready_before_the_upstream(proxy_factory, upstream):
    upstream.features_status = 503
    upstream.bootstrap_payload = SAMPLE
    proxy = proxy_factory(
        exp_bootstrap_url=f"http://127.0.0.1:{upstream.port}/bootstrap/features.json",
        exp_bootstrap_authorization="boot-token",
    )
    status, headers, body = proxy.get("/proxy?userId=u1&sessionId=s1", key=KEY)
    assert status == 200
    assert_node_body(headers, body, 'W/"876-gEN+QlEcLKfCqM0uTN6Nv+KrNKI"')
    request = upstream.received("/bootstrap/features.json")[0]
    assert request["headers"]["Authorization"] == "boot-token"
    # The upstream's first document replaces the bootstrap's once it answers.
    only = {"name": "from-upstream", "enabled": True, "strategies": [{"name": "default", "parameters": {}}]}
    upstream.payload = {"version": 2, "features": [only]}
    upstream.features_status = 200
    wait_until(lambda: [t["name"] for t in proxy.toggles()] == ["from-upstream"])


def test_http_proxy_setting_is_honoured(proxy_factory, loop_thread, upstream):
    forward = StubUpstream(loop_thread, json.loads(json.dumps(SAMPLE)))  # plays the HTTP proxy
    try:
        proxy_factory(service_url="http://flags.invalid:4242/api", http_proxy=forward.url.rsplit("/", 1)[0])
        assert forward.received("/api/client/features")  # ready: its flags came through the HTTP proxy
    finally:
        forward.stop()


def test_https_proxy_setting_tunnels_every_upstream_request(proxy_factory, loop_thread, tmp_path):
    secure = StubUpstream(loop_thread, json.loads(json.dumps(SAMPLE)), ssl_context=_self_signed(tmp_path))
    secure.bootstrap_payload = SAMPLE
    tunnel = ConnectProxy(loop_thread, hosts={"flags.invalid": "127.0.0.1"})  # only it knows this name
    try:
        upstream_url = f"https://flags.invalid:{secure.port}"
        proxy = proxy_factory(
            service_url=f"{upstream_url}/api",
            https_proxy=tunnel.url,
            http_proxy="http://127.0.0.1:9",  # for http:// URLs only: must not be used here
            http_options_reject_unauthorized=False,
            exp_bootstrap_url=f"{upstream_url}/bootstrap/features.json",
            metrics_interval=50,
        )
        proxy.post("/proxy", {"toggles": ["default-on"]}, key=KEY)
        for path in ("/api/client/features", "/api/client/register", "/api/client/metrics"):
            secure.wait_for(path)
        secure.wait_for("/bootstrap/features.json")
        assert set(tunnel.targets) == {f"flags.invalid:{secure.port}"}
    finally:
        tunnel.stop()
        secure.stop()


def test_http_proxy_carries_register_and_metrics_too(proxy_factory, loop_thread, upstream):
    forward = StubUpstream(loop_thread, json.loads(json.dumps(SAMPLE)))  # plays the HTTP proxy
    try:
        proxy = proxy_factory(
            service_url="http://flags.invalid:4242/api",
            http_proxy=forward.url.rsplit("/", 1)[0],
            metrics_interval=50,
        )
        proxy.post("/proxy", {"toggles": ["default-on"]}, key=KEY)
        forward.wait_for("/api/client/register")
        metrics = forward.wait_for("/api/client/metrics")[0]
        assert metrics["body"]["bucket"]["toggles"]["default-on"]["yes"] == 1
        assert upstream.received("/api/client/features") == []  # nothing went around the proxy
    finally:
        forward.stop()


def test_no_proxy_bypasses_the_http_proxy(proxy_factory, upstream):
    # HTTP_PROXY names a port where nothing listens: only a request that bypasses it reaches the upstream.
    proxy_factory(http_proxy="http://127.0.0.1:9", env={"NO_PROXY": "127.0.0.1"})
    assert upstream.received("/api/client/features")  # ready: straight from the upstream


def _self_signed(tmp_path) -> ssl.SSLContext:
    # A missing openssl fails the test rather than skipping it: .ci/run installs it.
    assert shutil.which("openssl"), "the openssl command is needed (apt package openssl)"
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(cert), str(key))
    return context


def test_reject_unauthorized(proxy_factory, loop_thread, tmp_path):
    secure = StubUpstream(loop_thread, json.loads(json.dumps(SAMPLE)), ssl_context=_self_signed(tmp_path))
    try:
        strict = proxy_factory(service_url=secure.url, wait=False, refresh_interval=50)
        warning = line_with(strict.read_until("certificate"), "certificate")
        assert warning.startswith("WARN: "), warning
        assert strict.get("/proxy/health")[0] == 503  # never ready: no document was accepted
        # rejectUnauthorized=false accepts it; HTTP_PROXY, for http:// URLs only, must not be used for it.
        relaxed = proxy_factory(
            service_url=secure.url, http_options_reject_unauthorized=False, http_proxy="http://127.0.0.1:9"
        )
        assert relaxed.toggles()
    finally:
        secure.stop()


def test_a_custom_logger_object_gets_every_message_and_stdout_none(embedded, upstream):
    # logLevel and useJsonLogger are for the default logger only: a custom one gets everything, as is.
    # A keyword-only option (an object): a program that embeds the proxy hands it one that writes
    # `LOGGED <level> <message>` lines to stderr (tests/http/embedded.py RecordingLogger).
    proxy = embedded(logger="recording", log_level="fatal", use_json_logger=True, refresh_interval=50)
    ready = line_with(proxy.read_until("ready to receive traffic"), "ready to receive traffic")
    assert ready.startswith("LOGGED info "), ready
    upstream.features_status = 503
    failed = line_with(proxy.read_until("answered 503"), "answered 503")
    assert failed.startswith("LOGGED warn "), failed
    proxy.stop()
    assert proxy.printed["stdout"] == ""


def test_a_stdlib_logger_works_as_the_custom_logger(embedded, upstream):
    # A logging.Logger whose handler writes `STDLIB <LEVELNAME> <message>` (tests/http/embedded.py).
    proxy = embedded(logger="stdlib", refresh_interval=50)
    ready = line_with(proxy.read_until("ready to receive traffic"), "ready to receive traffic")
    assert ready.startswith("STDLIB INFO "), ready
    upstream.features_status = 500
    failed = line_with(proxy.read_until("answered 500"), "answered 500")
    assert failed.startswith("STDLIB WARNING "), failed


def test_the_default_logger_honours_log_level_and_json(proxy_factory, upstream):
    proxy = proxy_factory(log_level="error", use_json_logger=True, refresh_interval=50)
    polls = len(upstream.received("/api/client/features"))
    upstream.features_status = 500  # a warning: below the level
    upstream.wait_for("/api/client/features", polls + 2)  # two failed polls, said (or not) by now
    upstream.features_status = 401  # an error: shown
    proxy.read_until("not allowed")
    proxy.stop()
    printed = proxy.printed["stdout"].splitlines()
    records = [json.loads(line) for line in printed]  # every line is one JSON object
    assert {r["level"] for r in records} == {"error"}
    assert any("not allowed" in r["message"] for r in records)
    assert not any("answered 500" in r["message"] or "ready" in r["message"] for r in records)


def line_with(printed: str, fragment: str) -> str:
    return next(line for line in printed.splitlines() if fragment in line)
