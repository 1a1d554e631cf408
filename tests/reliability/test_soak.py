"""The soak: `flagproxy proxy --workers 2` under steady load while its upstream's flags change every few
seconds (flags added and removed, strategies rewritten), then SIGTERM to its main process under that load.

Every answer names the revision that served it (a marker flag) and must be exactly what that revision
answers for the caller (compiled here from the same payload); no request fails; each worker's RSS grows
less than 10% from the end of the warm-up to the end; no worker is lost. The stop: in-flight answers
complete (none cut short), every named-toggle request answered is counted once in the metrics the
upstream received, exit 0, no traceback. SOAK_SECONDS is a minute in the short form, an hour in --long.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from tests.http.loopback import StubUpstream
from tests.http.processes import listening_workers, wait_until_listening
from tests.http.test_workers import proxy_env
from tests.reliability.figures import FIGURES, rss_kib
from tests.reliability.scale import PAYLOAD_CHANGE_SECONDS, SOAK_SECONDS, SOAK_WARMUP_SECONDS
from tests.reliability.soak import CONSTANT, ChangingPayload, Load

pytestmark = pytest.mark.slow

CALLERS = 3
RSS_GROWTH = 0.10


def delivered(upstream: StubUpstream) -> int:
    return sum(
        post["body"]["bucket"]["toggles"].get(CONSTANT, {}).get("yes", 0)
        for post in upstream.received("/api/client/metrics")
    )


def test_a_changing_payload_under_load_then_sigterm_to_the_main_process(launch, upstream):
    payload = ChangingPayload()
    upstream.payload = payload.next()
    process = launch(
        proxy_env(upstream, SERVICE_METRICS_INTERVAL="2000", LOG_LEVEL="info"), ["--workers", "2"]
    )
    process.wait_ready()
    pid = process.popen.pid
    wait_until_listening(process, 2)
    workers = listening_workers(process)

    stop = threading.Event()
    callers = [Load(process.port, payload, stop, number) for number in range(CALLERS)]
    for caller in callers:
        caller.start()
    started = time.monotonic()
    warm: dict[int, int] = {}
    next_change = started + PAYLOAD_CHANGE_SECONDS
    while time.monotonic() - started < SOAK_SECONDS:
        if not warm and time.monotonic() - started >= SOAK_WARMUP_SECONDS:
            warm = {worker: rss_kib(worker) for worker in workers}
        if time.monotonic() >= next_change:
            upstream.payload = payload.next()
            next_change += PAYLOAD_CHANGE_SECONDS
        assert all(caller.is_alive() for caller in callers)
        time.sleep(0.1)
    end = {worker: rss_kib(worker) for worker in workers}
    cut_before_stop = sum(caller.cut for caller in callers)
    lost = len(workers - listening_workers(process))

    # The stop, under the same load: SIGTERM to the main process only (what `kill <pid>` sends).
    os.kill(pid, signal.SIGTERM)
    stdout, stderr = process.popen.communicate(timeout=60)
    stop.set()
    for caller in callers:
        caller.join(15)

    problems = [problem for caller in callers for problem in caller.problems]
    answers = sum(caller.answers for caller in callers)
    named = sum(caller.named_ok for caller in callers)
    revisions = set().union(*(caller.revisions for caller in callers))
    FIGURES.watch(len(workers), lost)
    FIGURES.usage(named, delivered(upstream))
    FIGURES.notes["soak: answers checked against their revision"] = (
        f"{answers:,} answers over {len(revisions)} revisions in {SOAK_SECONDS / 60:.0f} min "
        f"(payload changed every {PAYLOAD_CHANGE_SECONDS:g} s)"
    )
    for number, worker in enumerate(sorted(workers), 1):
        FIGURES.rss[f"proxy worker {number}, soak (after warm-up → end)"] = (warm[worker], end[worker])

    assert problems == [], problems[:10]
    assert cut_before_stop == 0, [caller.last_cut for caller in callers]
    assert lost == 0
    assert len(revisions) >= SOAK_SECONDS / PAYLOAD_CHANGE_SECONDS / 2, revisions
    for worker in workers:
        assert end[worker] < warm[worker] * (1 + RSS_GROWTH), (worker, warm[worker], end[worker])
    assert process.popen.returncode == 0, stderr[-3000:]
    assert "Traceback" not in stdout + stderr, (stdout + stderr)[-3000:]
    # Every named-toggle request that was answered is counted once, the last ones by the stop's flush.
    assert delivered(upstream) == named
