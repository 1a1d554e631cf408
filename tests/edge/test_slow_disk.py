"""A slow disk never stalls an edge's answers (as tests/http/test_slow_disk.py for the proxy): a real
`flagproxy edge --workers 1` (its leader on the serving loop) whose renames, `utime`s and Prometheus file
writes each take a second answers at once, and the usage handed over meanwhile still reaches the upstream
and the backstage series count every request; SIGTERM exits 0."""

from __future__ import annotations

import signal
import time

from tests.edge.harness import CountingUpstream, edge, features_doc, wait_for
from tests.edge.test_workers import CLIENT, FRONTEND, bucket, usage_total
from tests.http.loopback import fetch
from tests.http.test_slow_disk import SLOW_SECONDS, slow_disk_env

METRICS = "/api/frontend/client/metrics"


def timed(port: int, method: str, path: str, body: bytes | None = None) -> float:
    """One request with the frontend token; its seconds (no answer in 5 s counts as 5)."""
    headers = {"Authorization": FRONTEND, "Content-Type": "application/json"}
    started = time.monotonic()
    try:
        status, _, answer = fetch(port, method, path, headers, body, timeout=5)
    except TimeoutError:
        return time.monotonic() - started
    assert status in (200, 202), answer
    return time.monotonic() - started


def requests_counted(port: int) -> float:
    _, _, body = fetch(port, "GET", "/internal-backstage/metrics")
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in body.decode().splitlines()
        if line.startswith("flagproxy_http_requests_total{") and "frontend" in line
    )


def test_an_edge_answers_while_every_file_write_takes_a_second(counting: CountingUpstream, tmp_path):
    import json

    counting.add(CLIENT, "client", "development", ["*"], features_doc(("f", "default", True)))
    counting.add(FRONTEND, "frontend", "development", ["*"])
    env, marker, log = slow_disk_env(tmp_path)
    process = edge(
        counting.url, [CLIENT], "--metrics-interval-seconds", "1", env={**env, "TMPDIR": str(tmp_path)}
    )
    try:
        process.wait_ready()
        usage = json.dumps(bucket(1)).encode()
        assert timed(process.port, "GET", "/api/frontend") < 5  # the token validated on a quick disk
        before = requests_counted(process.port)

        marker.touch()
        latencies, sent = [], 0
        window_end = time.monotonic() + 5 * SLOW_SECONDS
        while time.monotonic() < window_end:
            latencies.append(timed(process.port, "GET", "/api/frontend"))
            latencies.append(timed(process.port, "POST", METRICS, usage))
            sent += 1
            time.sleep(0.02)
        marker.unlink()

        slowed = log.read_text()
        for call in ("utime", "replace", "write_value"):  # the fault was met, in the serving process
            assert f"{process.popen.pid} {call}" in slowed, (call, slowed[:400])
        worst = max(latencies)
        assert worst < SLOW_SECONDS / 3, (
            f"an answer waited {worst:.3f} s on the disk ({sorted(latencies)[-5:]})"
        )

        wait_for(lambda: usage_total(counting) >= sent, "the usage handed over never reached the upstream")
        wait_for(lambda: requests_counted(process.port) >= before + 2 * sent, "requests were not counted")
    finally:
        process.stop(signal.SIGTERM)
    assert process.popen.returncode == 0, process.printed["stderr"][-2000:]
