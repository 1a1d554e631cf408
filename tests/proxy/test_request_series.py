"""How a worker's request series count (flagproxy/http/series.py `RequestSeries`, `RouteSeries`): the
hot path only appends a duration and a status, and each flush folds them into the cells in a batch. Read
back from the process's files the way a scrape reads them (`series_text`, prometheus_client's parser), the
folded counts must be what counting each request at once would give: a duration equal to a bucket's bound
lands in that bucket (`le`), every status has its own series, the sum is the durations' sum, nothing is
counted twice over several flushes, and the lists are emptied even when writing the file fails."""

from __future__ import annotations

import asyncio
import math
import time
from bisect import bisect_left
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from flagproxy.http import series as prometheus
from flagproxy.http.series import DURATION_BUCKETS, RequestSeries


class _Response:
    def __init__(self, status: int) -> None:
        self.status = status


class _Clock:
    """perf_counter for the wrapper: each request takes exactly the duration the test scripted for it (the
    first read gives 0.0, the second the duration, so the subtraction is exact)."""

    def __init__(self) -> None:
        self.next_duration = 0.0
        self.started = False

    def __call__(self) -> float:
        self.started = not self.started
        return 0.0 if self.started else self.next_duration


def _samples(text: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text.decode())
        for sample in family.samples
    }


def _expected(requests: list[tuple[float, int]], route: str) -> dict[tuple[str, tuple], float]:
    """Counting each request at once, as a per-request bisect over the bounds would."""
    want: dict[tuple[str, tuple], float] = {}
    per_bucket = Counter(bisect_left(DURATION_BUCKETS, d) for d, _ in requests)
    cumulative = 0
    for index, bound in enumerate(DURATION_BUCKETS):
        cumulative += per_bucket[index]
        le = "+Inf" if math.isinf(bound) else repr(bound)
        want[("flagproxy_http_request_duration_seconds_bucket", (("le", le), ("route", route)))] = cumulative
    for status, n in Counter(s for _, s in requests).items():
        want[("flagproxy_http_requests_total", (("route", route), ("status", str(status))))] = n
    return want


def _run(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, batches: list[list[tuple[float, int]]], route: str
) -> tuple[dict, RequestSeries]:
    clock = _Clock()
    monkeypatch.setattr(time, "perf_counter", clock)

    async def scenario() -> tuple[dict, RequestSeries]:
        metrics = RequestSeries(enabled=True)
        status_of: dict[str, int] = {}

        async def handler(request: Any) -> _Response:
            return _Response(status_of["next"])

        observed = metrics.observe(route, handler)
        metrics.start(str(tmp_path))
        text = b""
        for batch in batches:  # a scrape (a flush) between batches
            for duration, status in batch:
                clock.next_duration = duration
                status_of["next"] = status
                await observed(None)
            text = await metrics.series_text()
        await metrics.stop()
        return _samples(text), metrics

    return asyncio.run(scenario())


ON_BOUNDS = [(b, 200) for b in DURATION_BUCKETS[:-1]]


def test_a_duration_on_a_bound_is_in_that_bucket_and_every_status_counts(tmp_path, monkeypatch):
    requests = [*ON_BOUNDS, (0.0, 200), (0.00011, 304), (3.0, 503), (0.002, 200)]
    samples, _ = _run(tmp_path, monkeypatch, [requests], "toggles_post")
    for key, want in _expected(requests, "toggles_post").items():
        assert samples.get(key) == want, key
    count = samples[("flagproxy_http_request_duration_seconds_count", (("route", "toggles_post"),))]
    assert count == len(requests)
    total = samples[("flagproxy_http_request_duration_seconds_sum", (("route", "toggles_post"),))]
    assert total == pytest.approx(math.fsum(d for d, _ in requests))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.lists(
            st.tuples(
                st.one_of(st.sampled_from(DURATION_BUCKETS[:-1]), st.floats(0, 5, allow_nan=False)),
                st.sampled_from([200, 304, 400, 401, 503]),
            ),
            max_size=40,
        ),
        min_size=1,
        max_size=4,
    )
)
def test_folding_in_batches_counts_as_counting_each_request(tmp_path_factory, monkeypatch, batches):
    tmp_path = tmp_path_factory.mktemp("series")
    samples, metrics = _run(tmp_path, monkeypatch, batches, "toggles_get")
    every = [request for batch in batches for request in batch]
    for key, want in _expected(every, "toggles_get").items():
        assert samples.get(key, 0.0) == want, key
    total = samples[("flagproxy_http_request_duration_seconds_sum", (("route", "toggles_get"),))]
    assert total == pytest.approx(math.fsum(d for d, _ in every))
    series = metrics._routes["toggles_get"]
    assert series.durations == [] and series.statuses == []


def test_the_lists_are_emptied_when_writing_fails(tmp_path, monkeypatch):
    """A full disk must not turn the hot path's lists into a leak: the fold runs before the write."""

    async def scenario() -> None:
        metrics = RequestSeries(enabled=True)

        async def handler(request: Any) -> _Response:
            return _Response(200)

        observed = metrics.observe("toggles_post", handler)
        metrics.start(str(tmp_path))

        def full_disk() -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(metrics.counters, "flush", full_disk)
        monkeypatch.setattr(prometheus, "FLUSH_SECONDS", 0.01)
        metrics.flushing.cancel()  # type: ignore[union-attr]
        metrics.flushing = asyncio.get_running_loop().create_task(metrics._flush_every())
        for _ in range(500):
            await observed(None)
        await asyncio.sleep(0.1)  # several failing flushes
        series = metrics._routes["toggles_post"]
        assert series.durations == [] and series.statuses == []
        assert not metrics.flushing.done()  # still flushing
        monkeypatch.undo()
        text = await metrics.series_text()
        samples = _samples(text)
        key = ("flagproxy_http_requests_total", (("route", "toggles_post"), ("status", "200")))
        assert samples[key] == 500  # nothing lost: the cells kept the counts the failed writes did not
        await metrics.stop()

    asyncio.run(scenario())
