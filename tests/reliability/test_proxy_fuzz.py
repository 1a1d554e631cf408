"""Main's generated hostile requests (tests/http/test_fuzz.py: every route and near misses, hostile queries,
headers, content types and bodies) against a real `flagproxy proxy --workers 2` with every optional route
on: no 5xx, the same workers before and after, and the same answers afterwards."""

from __future__ import annotations

import pytest
from hypothesis import given

from tests.http.loopback import KEY, fetch
from tests.http.processes import listening_workers, wait_until_listening
from tests.http.test_fuzz import requests
from tests.http.test_workers import proxy_env
from tests.reliability.figures import FIGURES
from tests.reliability.scale import fuzz_settings, pick

pytestmark = pytest.mark.slow

EXAMPLES = int(pick(300, 3000))
CHECKS = ["/proxy?userId=u1", "/proxy/all?userId=u2", "/proxy/client/features", "/proxy/health"]


def test_generated_requests_leave_every_worker_and_the_same_answers(launch, upstream):
    env = proxy_env(
        upstream,
        ENABLE_ALL_ENDPOINT="true",
        ENABLE_OAS="true",
        EXP_SERVER_SIDE_SDK_CONFIG_TOKENS="server-side-token",
        SERVICE_METRICS_INTERVAL="0",
    )
    process = launch(env, ["--workers", "2"])
    process.wait_ready()
    wait_until_listening(process, 2)
    workers = listening_workers(process)

    def answers() -> set[tuple[str, int, bytes]]:
        found = set()
        for path in CHECKS:
            key = "server-side-token" if "features" in path else KEY
            for _ in range(4):  # over new connections: both workers, most likely
                status, _, body = fetch(process.port, "GET", path, {"Authorization": key})
                found.add((path, status, body))
        return found

    before = answers()
    assert len(before) == len(CHECKS) and all(status == 200 for _, status, _ in before), before

    @fuzz_settings(EXAMPLES)
    @given(request=requests())
    def fuzz(request):
        method, path, headers, body = request
        status, _, answer = fetch(process.port, method, path, headers, body)
        FIGURES.hostile_input("proxy: generated requests (hypothesis), 2 workers")
        assert status < 500, (method, path, headers, body, status, answer[:200])

    fuzz()
    assert answers() == before
    lost = len(workers - listening_workers(process))
    FIGURES.watch(len(workers), lost)
    assert listening_workers(process) == workers
