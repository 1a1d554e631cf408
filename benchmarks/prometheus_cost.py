"""What the Prometheus series add to one request, in-process: a route handler awaited bare and wrapped
by `RequestMetrics.observe` (flagproxy/proxy/prometheus.py), alternately, best of several rounds.

    python -m benchmarks.prometheus_cost

On a shared two-core machine the load benchmark's req/s swing by tens of percent between runs
(`python -m benchmarks.load --prometheus-off` measures both in one run); this isolates the wrapper.
"""

from __future__ import annotations

import asyncio
import tempfile
import time

from flagproxy.proxy.prometheus import RequestMetrics

CALLS = 200_000
ROUNDS = 5


class _Response:
    status = 200


async def _handler(request: object) -> _Response:
    return _Response()


async def _per_call_us(handler: object) -> float:
    started = time.perf_counter()
    for _ in range(CALLS):
        await handler(None)  # type: ignore[operator]
    return (time.perf_counter() - started) / CALLS * 1e6


async def _measure() -> tuple[float, float]:
    metrics = RequestMetrics(enabled=True)
    wrapped = metrics.observe("toggles_post", _handler)
    with tempfile.TemporaryDirectory() as directory:
        metrics.start(directory)
        bare, observed = [], []
        for _ in range(ROUNDS):
            bare.append(await _per_call_us(_handler))
            observed.append(await _per_call_us(wrapped))
        await metrics.stop()
    return min(bare), min(observed)


def main() -> None:
    bare, observed = asyncio.run(_measure())
    print(f"handler awaited bare:    {bare:.3f} µs a call")
    print(f"wrapped (series on):     {observed:.3f} µs a call")
    print(f"added by the series:     {observed - bare:.3f} µs a request")


if __name__ == "__main__":
    main()
