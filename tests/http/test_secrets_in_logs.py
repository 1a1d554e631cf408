"""No client key, server-side token or upstream token in any log line, at any level.

A real `flagproxy proxy --workers 2` at LOG_LEVEL=debug (every line it can print, Sanic's access log
included) and then with JSON logs is asked with right and wrong keys in every place a key goes, its
upstream refuses its token for a while, and its whole output is searched for every secret it was given.
"""

from __future__ import annotations

import json
import signal
import time

import pytest

from tests.http.loopback import fetch
from tests.http.processes import wait_until_listening

pytestmark = pytest.mark.slow

CLIENT_KEY = "client-key-c0ffee-0123456789"
SERVER_TOKEN = "server-token-beef-9876543210"
UPSTREAM_TOKEN = "upstream-token-feed-5555"
WRONG = "wrong-key-dead-4444"


@pytest.mark.parametrize("json_logs", ["false", "true"])
def test_no_secret_is_ever_logged(launch, upstream, json_logs):
    env = {
        "SERVICE_URL": upstream.url,
        "SERVICE_API_TOKEN": UPSTREAM_TOKEN,
        "SERVICE_PROXY_CLIENT_KEYS": CLIENT_KEY,
        "EXP_SERVER_SIDE_SDK_CONFIG_TOKENS": SERVER_TOKEN,
        "SERVICE_FETCH_INTERVAL": "100",
        "SERVICE_METRICS_INTERVAL": "200",
        "LOG_LEVEL": "debug",
        "ENABLE_ALL_ENDPOINT": "true",
        "JSON_LOGGER": json_logs,
    }
    process = launch(env, ["--workers", "2"])
    process.wait_ready()
    wait_until_listening(process, 2)
    named = json.dumps({"toggles": ["default-on"], "context": {"userId": "u1"}})
    for key in (CLIENT_KEY, SERVER_TOKEN, WRONG, f"Bearer {CLIENT_KEY}", CLIENT_KEY[:-1]):
        for method, path, body in (
            ("GET", "/proxy?userId=u1", None),
            ("POST", "/proxy", named),
            ("GET", "/proxy/all", None),
            ("GET", "/proxy/client/features", None),
            ("POST", "/proxy/client/metrics", json.dumps({"appName": "a", "instanceId": "b", "bucket": {}})),
        ):
            headers = {"Authorization": key, **({"Content-Type": "application/json"} if body else {})}
            assert fetch(process.port, method, path, headers, body)[0] < 500
    upstream.features_status = 401  # the upstream refuses the token: logged, without the token
    upstream.wait_for("/api/client/features", len(upstream.received("/api/client/features")) + 2)
    upstream.features_status = 200
    upstream.post_status = 403
    time.sleep(0.6)  # a metrics POST or two refused
    stdout, stderr = process.stop(signal.SIGTERM)
    output = stdout + stderr
    assert "answered 401" in output and "again; next poll" in output  # it logged, at debug level too
    for secret in (CLIENT_KEY, SERVER_TOKEN, UPSTREAM_TOKEN, WRONG, CLIENT_KEY[:-1]):
        assert secret not in output, secret
