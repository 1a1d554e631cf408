"""The Prometheus series of `flagproxy proxy` (flagproxy/http/series.py, docs/proxy.md), read back with
prometheus_client's own text parser from real processes on loopback: N workers add up to one instance,
a killed worker's counts stay in the sums, a new instance starts from zero, ENABLE_PROMETHEUS=false
leaves the Node proxy's three series alone."""

from __future__ import annotations

import json
import os
import resource
import signal
import time
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.http.loopback import KEY, SAMPLE, StubUpstream, fetch, free_port
from tests.http.processes import listening_workers, wait_until_listening
from tests.http.test_workers import proxy_env, send_named, wait_until

pytestmark = pytest.mark.slow

PROMETHEUS = "/proxy/internal-backstage/prometheus"
NODE_SERIES = (
    "# HELP last_metrics_update_epoch_timestamp_ms An epoch timestamp (in milliseconds) set to when "
    "the proxy last got an update from upstream\n# TYPE last_metrics_update_epoch_timestamp_ms gauge\n"
    "last_metrics_update_epoch_timestamp_ms "
)


def scrape(port: int) -> tuple[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]]:
    """The body and every sample as {(name, sorted labels): value}, parsed as Prometheus parses it."""
    status, headers, body = fetch(port, "GET", PROMETHEUS)
    assert status == 200, body
    assert headers["content-type"] == "text/plain; charset=utf-8; version=0.0.4"
    text = body.decode()
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    return text, samples


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def requests_of(port: int, route: str, status: str = "200") -> float:
    return value(scrape(port)[1], "flagproxy_http_requests_total", route=route, status=status)


def test_two_workers_add_up_and_every_series_is_there(launch, upstream: StubUpstream):
    process = launch(proxy_env(upstream), ["--workers", "2"])
    process.wait_ready()
    wait_until_listening(process, 2)
    sent = send_named(process, 30, workers=2)  # until both workers answered some

    def totals_arrived() -> bool:
        _, samples = scrape(process.port)
        usage = value(samples, "flagproxy_toggle_usage_total", toggle="default-on", result="yes")
        return requests_of(process.port, "toggles_post") == sent and usage == sent

    wait_until(totals_arrived, 10, "the workers' counts never added up")
    text, samples = scrape(process.port)
    assert text.startswith(NODE_SERIES)
    assert "\n# TYPE unleash_proxy_up counter\nunleash_proxy_up 1\n" in text
    assert value(samples, "flagproxy_http_request_duration_seconds_count", route="toggles_post") == sent
    assert (
        value(samples, "flagproxy_http_request_duration_seconds_bucket", route="toggles_post", le="+Inf")
        == sent
    )
    assert value(samples, "flagproxy_http_request_duration_seconds_sum", route="toggles_post") > 0
    assert value(samples, "flagproxy_toggle_usage_total", toggle="disabled-feature", result="no") == sent
    assert value(samples, "flagproxy_snapshot_revision") >= 1
    assert value(samples, "flagproxy_snapshot_age_seconds") >= 0
    assert value(samples, "flagproxy_flags") == len(SAMPLE["features"])
    assert value(samples, "flagproxy_upstream_fetches_total", result="updated") >= 1
    assert value(samples, "flagproxy_upstream_last_success_timestamp_seconds") > time.time() - 60
    # The health checks of wait_ready were answered too, by route and status.
    assert value(samples, "flagproxy_http_requests_total", route="health", status="200") >= 1

    # Metrics batches are counted by the main process (the sync), in the same sums.
    wait_until(
        lambda: value(scrape(process.port)[1], "flagproxy_usage_batches_total", result="sent") >= 1,
        10,
        "no metrics batch was counted",
    )

    # Preflights and unknown paths: the fallback, labelled apart.
    assert fetch(process.port, "OPTIONS", "/proxy", headers={"Origin": "https://a.example"})[0] == 204
    assert fetch(process.port, "GET", "/nowhere")[0] == 404
    wait_until(
        lambda: (
            requests_of(process.port, "preflight", "204") == 1
            and requests_of(process.port, "fallback", "404") == 1
        ),
        10,
        "preflight and 404 were not counted under their labels",
    )

    # A worker killed outright: what it had written stays in the sums, its replacement adds to them.
    victim = sorted(listening_workers(process))[0]
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: victim not in listening_workers(process) and len(listening_workers(process)) == 2,
               20, "the worker was not replaced")  # fmt: skip
    assert requests_of(process.port, "toggles_post") == sent
    more = send_named(process, 10, workers=2)
    wait_until(
        lambda: requests_of(process.port, "toggles_post") == sent + more, 10, "the new worker's counts"
    )
    _, stderr = process.stop(signal.SIGTERM)
    assert process.popen.returncode == 0, stderr


def test_a_new_instance_starts_from_zero(launch, upstream: StubUpstream, base_env):
    env = {**proxy_env(upstream), "PORT": str(free_port())}
    first = launch(env, ["--workers", "2"])
    first.wait_ready()
    sent = send_named(first, 5, workers=1)
    wait_until(lambda: requests_of(first.port, "toggles_post") == sent, 10, "first instance's counts")
    first.stop(signal.SIGTERM)
    second = launch(env, ["--workers", "2"])
    second.wait_ready()
    assert requests_of(second.port, "toggles_post") == 0
    folder = os.path.join(base_env["TMPDIR"], f"flagproxy-instance-service-proxy-{second.port}", "prometheus")
    assert os.path.isdir(folder)


def test_upstream_errors_by_kind_and_the_last_failure(proxy_factory, upstream: StubUpstream):
    proxy = proxy_factory(refresh_interval=50)
    upstream.features_status = 500
    wait_until(
        lambda: value(scrape(proxy.port)[1], "flagproxy_upstream_errors_total", kind="status") >= 1,
        10,
        "a 500 was not counted",
    )
    upstream.features_status = 401
    wait_until(
        lambda: value(scrape(proxy.port)[1], "flagproxy_upstream_errors_total", kind="auth") >= 1,
        10,
        "a 401 was not counted",
    )
    upstream.features_status = 200
    upstream.fault = "valid JSON of the wrong shape"
    wait_until(
        lambda: value(scrape(proxy.port)[1], "flagproxy_upstream_errors_total", kind="invalid") >= 1,
        10,
        "a 200 that is no features document was not counted",
    )
    _, samples = scrape(proxy.port)
    failed = value(samples, "flagproxy_upstream_last_failure_timestamp_seconds")
    assert failed >= value(samples, "flagproxy_upstream_last_success_timestamp_seconds") > 0
    assert value(samples, "flagproxy_upstream_fetches_total", result="failed") >= 2


def test_per_flag_series_only_for_flags_that_exist(proxy_factory):
    proxy = proxy_factory()
    body = json.dumps({"toggles": ["default-on", "no-such-flag-x"], "context": {"userId": "u"}})
    for _ in range(3):
        assert proxy.post("/proxy", json.loads(body), key=KEY)[0] == 200
    wait_until(
        lambda: (
            value(scrape(proxy.port)[1], "flagproxy_toggle_usage_total", toggle="default-on", result="yes")
            == 3
        ),
        10,
        "usage never counted",
    )
    assert "no-such-flag-x" not in scrape(proxy.port)[0]


def test_enable_prometheus_false_serves_the_node_series_only(launch, upstream: StubUpstream, base_env):
    process = launch({**proxy_env(upstream), "ENABLE_PROMETHEUS": "false"}, ["--workers", "2"])
    process.wait_ready()
    send_named(process, 5, workers=1)
    text, samples = scrape(process.port)
    assert text.startswith(NODE_SERIES)
    assert text.endswith("# TYPE unleash_proxy_up counter\nunleash_proxy_up 1\n")
    assert {name for name, _ in samples} == {
        "last_metrics_update_epoch_timestamp_ms",
        "last_metrics_fetch_epoch_timestamp_ms",
        "unleash_proxy_up_total",  # how Prometheus's parser reads the Node proxy's counter
    }
    folder = os.path.join(
        base_env["TMPDIR"], f"flagproxy-instance-service-proxy-{process.port}", "prometheus"
    )
    assert not [name for name in os.listdir(folder) if name.startswith("histogram_")]  # no request series


def test_usage_batches_sent_and_failed(proxy_factory, upstream: StubUpstream):
    proxy = proxy_factory(metrics_interval=100)
    named = {"toggles": ["default-on"], "context": {"userId": "u"}}

    def batches(result: str) -> float:
        return value(scrape(proxy.port)[1], "flagproxy_usage_batches_total", result=result)

    assert proxy.post("/proxy", named, key=KEY)[0] == 200
    wait_until(lambda: batches("sent") >= 1, 10, "no batch counted as sent")
    upstream.post_status = 503
    assert proxy.post("/proxy", named, key=KEY)[0] == 200
    wait_until(lambda: batches("failed") >= 1, 10, "no batch counted as failed")


def test_a_failing_series_write_is_said_once_and_its_end_once(launch, upstream: StubUpstream):
    """A full disk, as the kernel refuses it: the proxy's file-size limit (RLIMIT_FSIZE, set on the running
    process; CPython ignores SIGXFSZ) below what the series file must grow to for thousands of new per-flag
    series. Every flush fails until the limit is lifted; the log says so once, then once that it works
    again, and no count is lost."""
    names = [f"flag-{i:04d}-" + "x" * 300 for i in range(3000)]  # > 1 MiB of series keys: the file grows
    upstream.payload = {
        "version": 2,
        "features": [{"name": n, "enabled": True, "strategies": [{"name": "default"}]} for n in names],
    }
    process = launch(proxy_env(upstream, SERVICE_METRICS_INTERVAL="0", LOG_LEVEL="info"))  # one process
    process.wait_ready()
    pid = process.popen.pid
    _, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (1 << 20, hard))
    for start in range(0, len(names), 200):  # bodies under the proxy's limit
        toggles = {name: {"yes": 1, "no": 2} for name in names[start : start + 200]}
        bucket = {"start": "2024-01-01T00:00:00.000Z", "stop": "2024-01-01T00:01:00.000Z", "toggles": toggles}
        body = json.dumps({"appName": "a", "instanceId": "i", "bucket": bucket})
        status, _, _ = fetch(process.port, "POST", "/proxy/client/metrics", body=body,
                             headers={"Authorization": KEY, "Content-Type": "application/json"})  # fmt: skip
        assert status == 200
    seen = process.read_until("Writing the Prometheus series failed")
    time.sleep(2.5)  # ten flushes, every one failing
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, hard))
    seen += process.read_until("Writing the Prometheus series works again")
    _, samples = scrape(process.port)
    assert value(samples, "flagproxy_toggle_usage_total", toggle=names[-1], result="no") == 2
    stdout, stderr = process.stop(signal.SIGTERM)
    seen += stdout + stderr
    assert process.popen.returncode == 0, stderr
    assert seen.count("Writing the Prometheus series failed") == 1, seen[-3000:]
    assert seen.count("Writing the Prometheus series works again") == 1
