"""Engine benchmarks (pytest-benchmark); not collected by the default test run.

    python -m benchmarks.engine_report          # runs these and prints the table with ratios

Every case evaluates all flags of a deterministic snapshot for one context per round, rotating over 64
contexts, and checks the answer is right before timing it (as orjson's benches do).
"""

from __future__ import annotations

import gc
import itertools
import json
import time

import pytest

from benchmarks.datasets import contexts, snapshot_payload
from flagproxy.snapshot import compile_snapshot

SIZES = [50, 200, 1000, 5000]
CONTEXTS = contexts(64)


@pytest.fixture(autouse=True)
def _no_gc():
    gc.collect()
    gc.disable()
    yield
    gc.enable()


@pytest.mark.parametrize("flags", SIZES)
@pytest.mark.parametrize("implementation", ["compiled", "pure"])
def test_evaluate_all_body(benchmark, implementation: str, flags: int) -> None:
    payload = snapshot_payload(flags)
    snapshot = compile_snapshot(payload, implementation=implementation)
    reference = compile_snapshot(payload, implementation="pure")
    for ctx in CONTEXTS[:4]:  # correct before fast
        assert snapshot.evaluate_all_body(ctx)[0] == reference.evaluate_all_body(ctx)[0]
    rotation = itertools.cycle(CONTEXTS)
    evaluate = snapshot.evaluate_all_body
    benchmark.extra_info.update(flags=flags, implementation=implementation, kind="evaluate_all")
    benchmark(lambda: evaluate(next(rotation)))


@pytest.mark.parametrize("flags", [50, 200])
def test_yggdrasil_public_api(benchmark, flags: int) -> None:
    """Unleash's Rust engine through its public Python API: check_enabled + check_variant per flag."""
    # Imported here, not skipped when missing: the bench extra (pip install -e '.[bench]') installs it.
    import yggdrasil_engine.engine as yggdrasil

    payload = snapshot_payload(flags)
    engine = yggdrasil.UnleashEngine()
    engine.take_state(json.dumps(payload))
    names = [f["name"] for f in payload["features"]]
    ours = compile_snapshot(payload, implementation="compiled")
    for ctx in CONTEXTS[:4]:  # the same answers as ours, before timing
        enabled = {t["name"] for t in ours.evaluate_all(ctx)}
        assert enabled == {n for n in names if engine.check_enabled(n, ctx).is_enabled}
    rotation = itertools.cycle(CONTEXTS)

    def evaluate_all() -> None:
        ctx = next(rotation)
        for name in names:
            engine.check_enabled(name, ctx)
            engine.check_variant(name, ctx)

    benchmark.extra_info.update(flags=flags, implementation="yggdrasil-engine", kind="evaluate_all")
    benchmark.pedantic(evaluate_all, rounds=20 if flags > 100 else 50, iterations=1, warmup_rounds=1)


@pytest.mark.parametrize("flags", SIZES)
def test_compile_snapshot(benchmark, flags: int) -> None:
    payload = snapshot_payload(flags)
    benchmark.extra_info.update(flags=flags, implementation="compiled", kind="compile")
    snapshot = benchmark.pedantic(
        compile_snapshot,
        args=(payload,),
        kwargs={"implementation": "compiled"},
        rounds=5 if flags >= 1000 else 20,
        iterations=1,
    )
    assert len(snapshot) == flags


def test_compile_5000_flags_wall_clock() -> None:
    """Printed, not asserted: a benchmark states figures, tests do not time things."""
    payload = snapshot_payload(5000)
    start = time.perf_counter()
    compile_snapshot(payload)
    print(f"\ncompile 5000 flags: {time.perf_counter() - start:.3f} s")
